"""Plain pandas views of run directories: what the app's pages and ``gdro report`` plot.

No Streamlit here, so every function is testable on its own; the app wraps :func:`load_run`
in ``st.cache_data`` keyed on :func:`run_signature`. Runs are read with
``gdro_lab.runlog.read_run`` and the paper's diagnostics (§5: Eq. 32 lead-lag gap, Eq. 33
SE proxy, Fig. 1 tail averages, Fig. 5 snapshots, effective support, worst group) come from
``gdro_lab.diagnostics``, the same pure functions the producers use.

Conventions: per-bin arrays of a run have shape (T, G), scalars (T,); bin 0 is the hardest
bin. Long frames (one row per step and series) are returned for charts; a field a run does not
log gives an empty frame, never an exception.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from gdro_lab import diagnostics
from gdro_lab.runlog import (CONFIG_FILE, EVAL_FILE, META_FILE, SNAPSHOT_DIR, STEPS_FILE, RunData,
                             RunFormatError, is_run_dir, read_run)

#: Heatmaps of longer runs average blocks of consecutive steps down to this many columns
#: (the app asks for fewer, see ``apps.ui.heatmap_columns``: browsers draw every cell).
HEATMAP_MAX_COLUMNS = 300
#: Fig. 1 bars: mean over the steps at or after this quantile of the step range.
TAIL_QUANTILE = 0.6
TAIL_LABEL = "tail average"
#: Paper defaults for Rollout-GDRO (App. A) when a run's config does not say.
PAPER_ROLLOUTS = {"n_bar": 4.0, "n_min": 2.0, "n_max": 12.0}
#: Config keys (searched at any depth) that hold the mean budget and the arm bounds.
ROLLOUT_KEYS = {
    "n_bar": ("n_bar", "mean_rollouts", "rollouts_per_prompt", "rollout_n", "num_rollouts"),
    "n_min": ("n_min", "min_rollouts"),
    "n_max": ("n_max", "max_rollouts"),
}
#: Folders never searched for runs (besides hidden ones).
SKIPPED_FOLDERS = frozenset({"__pycache__", "node_modules", "site-packages", "venv", "snapshots"})
SE_COLUMNS = ("se_actual", "se_uniform", "se_sqrt", "se_reduction_pct", "se_sqrt_reduction_pct")
#: Scalars the Compare page shows by default, then those it offers next (then all others).
COMPARE_DEFAULTS = ("mean_success", "worst_bin_success", "lead_lag_gap", "se_reduction_pct")
COMPARE_NEXT = ("effective_support", "mu", "mean_rollouts")


class RunLoadError(Exception):
    """A run directory cannot be shown; the message is one line that names the problem and the fix."""


@dataclass(frozen=True)
class RunEntry:
    """A run offered in the app: its folder and a short unique label."""

    path: Path
    label: str


@dataclass(frozen=True)
class RolloutSettings:
    """Mean rollout budget n_bar and arm bounds [n_min, n_max], and where they came from."""

    n_bar: float
    n_min: float
    n_max: float
    source: str


@dataclass(frozen=True)
class BudgetCheck:
    """Whether the realized mean rollouts per prompt stayed at the budget n_bar every step."""

    frame: pd.DataFrame
    target: float
    max_deviation: float
    worst_step: int | None
    held: bool


# ----------------------------------------------------------------------------- finding and loading

def run_label(path: Path, root: Path | None) -> str:
    """The run's folder relative to ``root`` when inside it, else its own name."""
    if root is not None:
        try:
            relative = path.resolve().relative_to(root.resolve())
            if relative.parts:
                return relative.as_posix()
        except (ValueError, OSError):
            pass
    return path.name or str(path)


def find_run_dirs(root: Path, max_depth: int = 6, max_folders: int = 20_000) -> tuple[list[Path], bool]:
    """Run directories under ``root`` (itself included), sorted; and whether the search was cut short.

    Like ``gdro_lab.runlog.find_runs`` but bounded for an interactive app, where a runs folder
    can be typed by hand: at most ``max_depth`` levels and ``max_folders`` folders are visited,
    hidden folders and virtual environments are skipped, and a run's own folder is not searched.
    """
    found: list[Path] = []
    visited = 0
    truncated = False
    base_depth = len(root.parts)
    for folder, subfolders, files in os.walk(root):
        visited += 1
        here = Path(folder)
        if META_FILE in files and is_run_dir(here):
            found.append(here)
            subfolders[:] = []
            continue
        if visited >= max_folders or len(here.parts) - base_depth >= max_depth:
            truncated = truncated or bool(subfolders)
            subfolders[:] = []
            if visited >= max_folders:
                break
            continue
        subfolders[:] = sorted(name for name in subfolders if not name.startswith(".") and name not in SKIPPED_FOLDERS)
    return sorted(found), truncated


def discover_runs(root: Path | None, given: Sequence[Path] = (), found: Sequence[Path] | None = None) -> list[RunEntry]:
    """Runs given explicitly (kept even when invalid, so the page can say why) then runs under ``root``.

    ``found`` are the runs under ``root`` when already searched (:func:`find_run_dirs`).
    """
    if found is None:
        found = find_run_dirs(root)[0] if root is not None else []
    paths: list[Path] = []
    for path in [*given, *found]:
        if all(path.resolve() != known.resolve() for known in paths):
            paths.append(path)
    labels: list[str] = []
    for path in paths:
        label = run_label(path, root)
        while label in labels:
            label = f"{label} ({path.parent.name or path.parent})"
            if label in labels:
                label = str(path)
                break
        labels.append(label)
    return [RunEntry(path, label) for path, label in zip(paths, labels)]


def run_signature(path: Path) -> tuple[tuple[str, int, int], ...]:
    """(file, mtime_ns, size) of every file a run reader looks at: changes whenever a run grows."""
    signature = []
    for name in (META_FILE, CONFIG_FILE, STEPS_FILE, EVAL_FILE, SNAPSHOT_DIR):
        try:
            stat = (path / name).stat()
            signature.append((name, stat.st_mtime_ns, stat.st_size))
        except OSError:
            signature.append((name, -1, -1))
    return tuple(signature)


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def load_run(path: Path) -> RunData:
    """Read a run; every failure becomes a :class:`RunLoadError` with a one-line message.

    Steps where no prompt is assigned to a bin yet get null (NaN) shares (:func:`mask_unassigned`).
    """
    try:
        return mask_unassigned(read_run(path))
    except RunFormatError as err:
        raise RunLoadError(_one_line(str(err))) from None
    except OSError as err:
        raise RunLoadError(_one_line(f"{path} could not be read ({err.strerror or err}): "
                                     "check that the folder and its files are readable")) from None
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as err:
        raise RunLoadError(_one_line(f"{path} holds a malformed record ({type(err).__name__}: {err}): "
                                     "the run's files are damaged; check its producer")) from None


def assigned_counts(run: RunData) -> np.ndarray | None:
    """Prompts assigned to some bin per step, shape (T,): sum of the ``count`` bins, else
    ``num_prompts - num_unassigned``; None when the run logs neither."""
    if "count" in run.bins:
        return np.nansum(run.bins["count"], axis=1)
    if "num_prompts" in run.scalars and "num_unassigned" in run.scalars:
        return run.scalars["num_prompts"] - run.scalars["num_unassigned"]
    return None


def mask_unassigned(run: RunData) -> RunData:
    """The run with null shares on steps where no prompt is in any bin yet (returns the same object).

    A producer logs share 0 for every bin while the classifier has not assigned any prompt
    (the first ~50 steps of a simulator run); those zeros are not data, so the app shows them
    as missing ("unassigned") instead. The run's files are not touched.
    """
    assigned = assigned_counts(run)
    if assigned is None or "share" not in run.bins or run.steps.size == 0:
        return run
    empty_T = ~(np.nan_to_num(assigned) > 0)
    if empty_T.any():
        share = run.bins["share"].copy()
        share[empty_T] = np.nan
        run.bins["share"] = share
    return run


def unassigned_steps(run: RunData) -> int:
    """Number of logged steps on which no prompt was assigned to any bin (shares shown as null)."""
    assigned = assigned_counts(run)
    return 0 if assigned is None else int((~(np.nan_to_num(assigned) > 0)).sum())


def eval_tail_torn(path: Path) -> bool:
    """True when ``eval.jsonl`` ends in a torn line (no final newline, or an unparseable last line);
    the reader drops that line, and the app says so."""
    target = path / EVAL_FILE
    try:
        with open(target, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 65536))
            tail = handle.read()
    except OSError:
        return False
    if not tail:
        return False
    if not tail.endswith(b"\n"):
        return True
    last = tail.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    try:
        record = json.loads(last) if last.strip() else {}
    except (ValueError, UnicodeDecodeError):
        return True
    return not isinstance(record, dict)


def folder_problem(root: Path) -> str | None:
    """Why ``root`` cannot be searched for runs (one line), or None when it is a folder."""
    if root.is_dir():
        return None
    if root.exists():
        return f"`{root}` is a file, not a folder: type the folder that holds the run directories"
    return f"`{root}` does not exist: type an existing folder"


# ----------------------------------------------------------------------------- basic accessors

def bin_labels(run: RunData) -> list[str]:
    """The run's bin labels (from meta.json), or ``bin_b`` when they are missing or malformed."""
    labels = run.meta.get("bin_labels")
    if isinstance(labels, list) and len(labels) == run.num_bins:
        return [str(label) for label in labels]
    return [f"bin_{b}" for b in range(run.num_bins)]


def has_bins(run: RunData, field: str) -> bool:
    """True when the run logs the per-bin ``field`` with at least one value."""
    return field in run.bins and bool(np.isfinite(run.bins[field]).any())


def has_scalar(run: RunData, name: str) -> bool:
    """True when the run logs the scalar ``name`` with at least one value."""
    return name in run.scalars and bool(np.isfinite(run.scalars[name]).any())


def reward_field(run: RunData) -> str | None:
    """``reward`` when logged, else ``success`` (the realized reward panel), else None."""
    return next((field for field in ("reward", "success") if has_bins(run, field)), None)


def step_index(run: RunData, step: int) -> int:
    """Index of the logged step closest to ``step`` (0 for an empty run)."""
    if run.steps.size == 0:
        return 0
    return int(np.argmin(np.abs(run.steps - int(step))))


def summary(run: RunData) -> dict[str, Any]:
    """One-line facts about a run for captions: status, producer, steps, bins, torn tail."""
    return {"status": str(run.meta.get("status", "unknown")), "producer": str(run.meta.get("producer", "")),
            "steps": int(run.steps.size), "last_step": int(run.steps[-1]) if run.steps.size else None,
            "bins": run.num_bins, "evals": len(run.evals), "snapshots": len(run.snapshot_steps),
            "torn_tail": bool(run.torn_tail), "eval_torn": eval_tail_torn(run.path),
            "unassigned_steps": unassigned_steps(run)}


def torn_notes(run: RunData) -> list[str]:
    """Honest captions for torn last lines: still being written (running) or damaged (finished)."""
    facts = summary(run)
    running = facts["status"] == "running"
    notes = []
    for torn, name in ((facts["torn_tail"], STEPS_FILE), (facts["eval_torn"], EVAL_FILE)):
        if not torn:
            continue
        if running:
            notes.append(f"the last line of {name} is still being written (not shown yet)")
        else:
            notes.append(f"the last line of {name} is cut short and was ignored: the run is "
                         f"{facts['status']}, so the file was damaged (e.g. a crash or a full disk)")
    return notes


def _nanmean(values: np.ndarray, axis: int) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        return np.nanmean(values, axis=axis)


def _step_ends(steps: np.ndarray) -> np.ndarray:
    """End of each step's cell on a step axis: the next logged step (last: plus the usual stride)."""
    if steps.size == 0:
        return steps.astype(float)
    stride = float(np.median(np.diff(steps))) if steps.size > 1 else 1.0
    return np.append(steps[1:], steps[-1] + max(stride, 1.0)).astype(float)


# ----------------------------------------------------------------------------- traveling wave

def heatmap_block(num_steps: int, max_columns: int = HEATMAP_MAX_COLUMNS) -> int:
    """Steps averaged per heatmap column so that ``num_steps`` fit in ``max_columns`` columns."""
    return max(1, math.ceil(num_steps / max(1, max_columns)))


def heatmap_frame(run: RunData, field: str, max_columns: int = HEATMAP_MAX_COLUMNS) -> pd.DataFrame:
    """Long frame of a per-bin field over steps: columns step, step_end, bin, label, value.

    Runs longer than ``max_columns`` steps average blocks of consecutive steps (NaN-aware), so
    a chart never draws more than max_columns x G cells.
    """
    if not has_bins(run, field) or run.steps.size == 0:
        return pd.DataFrame(columns=["step", "step_end", "bin", "label", "value"])
    values_TG = run.bins[field]
    starts, ends = run.steps.astype(float), _step_ends(run.steps)
    block = heatmap_block(values_TG.shape[0], max_columns)
    if block > 1:
        groups = np.arange(values_TG.shape[0]) // block
        first = np.searchsorted(groups, np.unique(groups))
        last = np.append(first[1:] - 1, values_TG.shape[0] - 1)
        values_TG = np.stack([_nanmean(values_TG[a:b + 1], axis=0) for a, b in zip(first, last)])
        starts, ends = starts[first], ends[last]
    num_rows, num_bins = values_TG.shape
    labels = bin_labels(run)
    return pd.DataFrame({
        "step": np.repeat(starts, num_bins),
        "step_end": np.repeat(ends, num_bins),
        "bin": np.tile(np.arange(num_bins), num_rows),
        "label": np.tile(np.array(labels, dtype=object), num_rows),
        "value": values_TG.reshape(-1),
    })


def bins_at_step(run: RunData, fields: Iterable[str], index: int) -> pd.DataFrame:
    """Per-bin values of several fields at one step index: columns bin, label, field, value."""
    labels = bin_labels(run)
    rows = [{"bin": b, "label": labels[b], "field": field, "value": float(run.bins[field][index, b])}
            for field in fields if has_bins(run, field) and 0 <= index < run.steps.size
            for b in range(run.num_bins)]
    return pd.DataFrame(rows, columns=["bin", "label", "field", "value"])


def snapshot_frame(run: RunData, field: str) -> pd.DataFrame:
    """Fig. 5 snapshot rows (start, early-mid, late-mid, end) and the Fig. 1 tail average of a field.

    Columns: snapshot (e.g. ``"start (step 0)"``), order, bin, label, value.
    """
    columns = ["snapshot", "order", "bin", "label", "value"]
    if not has_bins(run, field) or run.steps.size == 0:
        return pd.DataFrame(columns=columns)
    values_TG = run.bins[field]
    labels = bin_labels(run)
    rows = []
    named = diagnostics.snapshot_steps(run.steps.size)
    for order, (name, index) in enumerate(named.items()):
        rows += [(f"{name} (step {int(run.steps[index])})", order, b, labels[b], float(values_TG[index, b]))
                 for b in range(run.num_bins)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        tail = diagnostics.tail_average(values_TG, TAIL_QUANTILE)
    rows += [(f"{TAIL_LABEL} (≥{int(TAIL_QUANTILE * 100)}th pct)", len(named), b, labels[b], float(tail[b]))
             for b in range(run.num_bins)]
    return pd.DataFrame(rows, columns=columns)


# ----------------------------------------------------------------------------- lead-lag

def lead_lag_frame(run: RunData) -> pd.DataFrame:
    """Eq. 32 per step: columns step, gap, mu_weight, mu_data (from the share and weight bins).

    Uses ``diagnostics.lead_lag_gap`` on the logged bins, skipping steps where no prompt is in a
    bin yet (the data's mean bin is undefined there); when a run logs only the scalars
    ``lead_lag_gap``/``mu_weight``/``mu_data``, those are used. Empty when neither exists.
    """
    columns = ["step", "gap", "mu_weight", "mu_data"]
    if has_bins(run, "share") and has_bins(run, "weight"):
        # diagnostics.lead_lag_gap for every step at once: index · normalised weights / shares.
        share_TG, weight_TG = np.nan_to_num(run.bins["share"]), np.nan_to_num(run.bins["weight"])
        share_T, weight_T = share_TG.sum(axis=1), weight_TG.sum(axis=1)
        keep = (share_T > 0) & (weight_T > 0)
        index_G = np.arange(run.num_bins, dtype=float)
        mu_weight = (weight_TG[keep] @ index_G) / weight_T[keep]
        mu_data = (share_TG[keep] @ index_G) / share_T[keep]
        return pd.DataFrame({"step": run.steps[keep].astype(int), "gap": mu_weight - mu_data,
                             "mu_weight": mu_weight, "mu_data": mu_data}, columns=columns)
    if has_scalar(run, "lead_lag_gap"):
        nan = np.full(run.steps.size, np.nan)
        return pd.DataFrame({"step": run.steps, "gap": run.scalars["lead_lag_gap"],
                             "mu_weight": run.scalars.get("mu_weight", nan),
                             "mu_data": run.scalars.get("mu_data", nan)}, columns=columns)
    return pd.DataFrame(columns=columns)


def to_long(frame: pd.DataFrame, names: Mapping[str, str]) -> pd.DataFrame:
    """Wide frame (step + columns) to long (step, series, value), renaming columns via ``names``."""
    present = [column for column in names if column in frame.columns]
    if frame.empty or not present:
        return pd.DataFrame(columns=["step", "series", "value"])
    long = frame.melt(id_vars="step", value_vars=present, var_name="series", value_name="value")
    long["series"] = long["series"].map(names)
    return long.dropna(subset=["value"]).reset_index(drop=True)


def scalars_long(run: RunData, names: Mapping[str, str]) -> pd.DataFrame:
    """Logged scalars as a long frame (step, series, value); ``names`` maps scalar to series name."""
    frame = pd.DataFrame({"step": run.steps, **{name: run.scalars[name] for name in names if name in run.scalars}})
    return to_long(frame, names)


# ----------------------------------------------------------------------------- rollout budget

def _find_number(config: Any, keys: Sequence[str]) -> float | None:
    """First number stored under any of ``keys`` in a nested config (breadth-first)."""
    queue = [config]
    while queue:
        node = queue.pop(0)
        if isinstance(node, Mapping):
            for key in keys:
                value = node.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                    return float(value)
            queue.extend(node.values())
        elif isinstance(node, list):
            queue.extend(node)
    return None


def rollout_settings(run: RunData) -> RolloutSettings:
    """n_bar, n_min, n_max from the run's config (any depth), else the paper's 4, 2, 12."""
    found = {name: _find_number(run.config, keys) for name, keys in ROLLOUT_KEYS.items()}
    values = {name: PAPER_ROLLOUTS[name] if value is None else value for name, value in found.items()}
    missing = [name for name, value in found.items() if value is None]
    source = "config" if not missing else f"paper defaults for {', '.join(missing)}"
    return RolloutSettings(values["n_bar"], values["n_min"], values["n_max"], source)


def _counts_TG(run: RunData) -> np.ndarray | None:
    """Prompt counts per bin (or shares when counts are not logged); None when neither is."""
    for field in ("count", "share"):
        if has_bins(run, field):
            return np.nan_to_num(run.bins[field])
    return None


def budget_check(run: RunData, tolerance: float = 1e-6) -> BudgetCheck | None:
    """Realized mean rollouts per prompt, sum_b count_b n_b / sum_b count_b, against n_bar per step.

    Uses the scalar ``mean_rollouts`` when logged (it includes every prompt), else the bins.
    ``held`` when every step is within ``tolerance`` (relative) of n_bar. None without rollouts.
    """
    settings = rollout_settings(run)
    if has_scalar(run, "mean_rollouts"):
        realized = run.scalars["mean_rollouts"]
    elif has_bins(run, "rollouts") and (counts := _counts_TG(run)) is not None:
        spent = np.nansum(counts * np.nan_to_num(run.bins["rollouts"]), axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            realized = np.where(counts.sum(axis=1) > 0, spent / counts.sum(axis=1), np.nan)
    else:
        return None
    deviation = np.abs(realized - settings.n_bar)
    finite = np.isfinite(deviation)
    worst = int(np.nanargmax(np.where(finite, deviation, -1.0))) if finite.any() else None
    max_deviation = float(deviation[worst]) if worst is not None else float("nan")
    frame = pd.DataFrame({"step": run.steps, "realized": realized,
                          "target": np.full(run.steps.size, settings.n_bar)})
    held = worst is not None and max_deviation <= tolerance * max(1.0, settings.n_bar)
    return BudgetCheck(frame, settings.n_bar, max_deviation,
                       int(run.steps[worst]) if worst is not None else None, bool(held))


def frontier_frame(run: RunData, index: int) -> pd.DataFrame:
    """Fig. 9 budget frontier at one step: per bin the share of prompts and the share of rollouts.

    Columns: bin, label, prompt_share, rollout_share, multiple (rollout share / prompt share,
    i.e. rollouts per prompt relative to the uniform allocation).
    """
    columns = ["bin", "label", "prompt_share", "rollout_share", "multiple"]
    counts_TG = _counts_TG(run)
    if counts_TG is None or not has_bins(run, "rollouts") or not 0 <= index < run.steps.size:
        return pd.DataFrame(columns=columns)
    counts = counts_TG[index]
    spent = counts * np.nan_to_num(run.bins["rollouts"][index])
    prompt_share = counts / counts.sum() if counts.sum() > 0 else np.zeros_like(counts)
    rollout_share = spent / spent.sum() if spent.sum() > 0 else np.zeros_like(spent)
    with np.errstate(invalid="ignore", divide="ignore"):
        multiple = np.where(prompt_share > 0, rollout_share / prompt_share, np.nan)
    return pd.DataFrame({"bin": np.arange(run.num_bins), "label": bin_labels(run),
                         "prompt_share": prompt_share, "rollout_share": rollout_share,
                         "multiple": multiple}, columns=columns)


def frontier_split(frontier: pd.DataFrame, first_bin: int) -> tuple[float, float]:
    """(prompt share, rollout share) held by bins >= ``first_bin`` (Fig. 9: ">80% of rollouts on <20% of prompts")."""
    upper = frontier[frontier["bin"] >= first_bin]
    return float(upper["prompt_share"].sum()), float(upper["rollout_share"].sum())


# ----------------------------------------------------------------------------- SE proxy

def se_frame(run: RunData) -> pd.DataFrame:
    """Eq. 33 per step: step plus se_actual, se_uniform, se_sqrt and both reductions in percent.

    Uses the logged scalars when the run has them; otherwise recomputes with
    ``diagnostics.se_report`` from the share, sigma and rollouts bins and the run's budget.
    """
    columns = ["step", *SE_COLUMNS]
    if has_scalar(run, "se_actual") and has_scalar(run, "se_uniform"):
        nan = np.full(run.steps.size, np.nan)
        frame = pd.DataFrame({"step": run.steps, **{name: run.scalars.get(name, nan) for name in SE_COLUMNS}})
        with np.errstate(invalid="ignore", divide="ignore"):
            if not has_scalar(run, "se_reduction_pct"):
                frame["se_reduction_pct"] = 100.0 * (1.0 - frame["se_actual"] / frame["se_uniform"])
            if not has_scalar(run, "se_sqrt_reduction_pct"):
                frame["se_sqrt_reduction_pct"] = 100.0 * (1.0 - frame["se_sqrt"] / frame["se_uniform"])
        return frame[columns]
    if not all(has_bins(run, field) for field in ("share", "sigma", "rollouts")):
        return pd.DataFrame(columns=columns)
    settings = rollout_settings(run)
    rows = []
    for t, step in enumerate(run.steps):
        share = np.nan_to_num(run.bins["share"][t])
        try:
            report = diagnostics.se_report(share, run.bins["sigma"][t], np.nan_to_num(run.bins["rollouts"][t]),
                                           settings.n_bar, settings.n_min, settings.n_max)
        except ValueError:  # no active bin, or a budget outside the arm box: nothing to compare
            continue
        rows.append({"step": int(step), **report})
    return pd.DataFrame(rows, columns=columns)


def mean_reduction(frame: pd.DataFrame, column: str = "se_reduction_pct") -> float:
    """Reduction averaged over the plotted horizon, as the paper reports it (22.6-37.1%)."""
    if frame.empty or column not in frame:
        return float("nan")
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)
    return float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")


# ----------------------------------------------------------------------------- outcomes

def outcomes_frame(run: RunData) -> pd.DataFrame:
    """Training outcomes per step: mean_success, worst_bin_success, effective_support.

    Logged scalars first; otherwise computed from the bins with ``diagnostics.worst_group``
    (over the success bins) and ``diagnostics.effective_support`` (over the weight bins).
    """
    frame = pd.DataFrame({"step": run.steps})
    if has_scalar(run, "mean_success"):
        frame["mean_success"] = run.scalars["mean_success"]
    elif has_bins(run, "success") and (counts := _counts_TG(run)) is not None:
        success = run.bins["success"]
        weights = np.where(np.isfinite(success), counts, 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            frame["mean_success"] = np.nansum(weights * np.nan_to_num(success), axis=1) / weights.sum(axis=1)
    if has_scalar(run, "worst_bin_success"):
        frame["worst_bin_success"] = run.scalars["worst_bin_success"]
    elif has_bins(run, "success"):
        frame["worst_bin_success"] = [diagnostics.worst_group(row) for row in run.bins["success"]]
    if has_scalar(run, "effective_support"):
        frame["effective_support"] = run.scalars["effective_support"]
    elif has_bins(run, "weight"):
        frame["effective_support"] = [diagnostics.effective_support(np.nan_to_num(row)) for row in run.bins["weight"]]
    return frame


def evals_frame(run: RunData) -> pd.DataFrame:
    """Evaluation records as a long frame: step, metric, value (numbers only)."""
    rows = []
    for record in run.evals:
        metrics = record.get("metrics")
        if not isinstance(metrics, Mapping):
            continue
        for name, value in metrics.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                rows.append((int(record.get("step", -1)), str(name), float(value)))
    return pd.DataFrame(rows, columns=["step", "metric", "value"])


def pass_at_k_metrics(evals: pd.DataFrame) -> list[str]:
    """Eval metric names of the pass@k family (``pass@8``, ``worst_group_pass@8``...), sorted."""
    if evals.empty:
        return []
    return sorted({name for name in evals["metric"] if "pass@" in name})


def accuracy_metrics(evals: pd.DataFrame) -> list[str]:
    """Eval metric names of the accuracy family (``accuracy``, ``worst_group_accuracy``...), sorted."""
    if evals.empty:
        return []
    return sorted({name for name in evals["metric"] if "accuracy" in name and "pass@" not in name})


def latest_evals(evals: pd.DataFrame) -> pd.DataFrame:
    """The last evaluation's metrics: columns metric, value (indexed for a table)."""
    if evals.empty:
        return pd.DataFrame(columns=["metric", "value"])
    last = evals[evals["step"] == evals["step"].max()]
    return last[["metric", "value"]].sort_values("metric").reset_index(drop=True)


# ----------------------------------------------------------------------------- compare and config

def scalar_names(runs: Iterable[RunData]) -> list[str]:
    """Scalars logged by any of the runs, the usual comparison metrics first."""
    names = sorted({name for run in runs for name in run.scalars if has_scalar(run, name)})
    first = [name for name in (*COMPARE_DEFAULTS, *COMPARE_NEXT) if name in names]
    return first + [name for name in names if name not in first]


def metric_series(run: RunData, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of one scalar with finite values only, as numpy arrays (the lead-lag gap
    recomputed by Eq. 32 as in :func:`compare_frame`); empty arrays when the run does not log it."""
    if metric == "lead_lag_gap":
        frame = lead_lag_frame(run)
        steps, values = frame["step"].to_numpy(dtype=float), frame["gap"].to_numpy(dtype=float)
    elif metric in run.scalars:
        steps, values = run.steps.astype(float), run.scalars[metric].astype(float)
    else:
        return np.array([]), np.array([])
    keep = np.isfinite(values)
    return steps[keep], values[keep]


def compare_frame(runs: Mapping[str, RunData], metric: str) -> pd.DataFrame:
    """One scalar over steps for several runs: columns step, run, value (lead-lag recomputed per Eq. 32)."""
    parts = []
    for label, run in runs.items():
        if metric == "lead_lag_gap":
            frame = lead_lag_frame(run)[["step", "gap"]].rename(columns={"gap": "value"})
        elif has_scalar(run, metric):
            frame = pd.DataFrame({"step": run.steps, "value": run.scalars[metric]})
        else:
            continue
        parts.append(frame.assign(run=label))
    if not parts:
        return pd.DataFrame(columns=["step", "run", "value"])
    combined = pd.concat(parts, ignore_index=True)[["step", "run", "value"]]
    combined["value"] = pd.to_numeric(combined["value"], errors="coerce")
    return combined.dropna(subset=["value"]).reset_index(drop=True)


def compare_table(runs: Mapping[str, RunData], metrics: Sequence[str]) -> pd.DataFrame:
    """Per run: steps logged and, per metric, the final value and the tail average (≥60th pct of steps)."""
    rows = []
    for label, run in runs.items():
        row: dict[str, Any] = {"run": label, "steps": int(run.steps.size)}
        for metric in metrics:
            values = compare_frame({label: run}, metric)["value"].to_numpy(dtype=float)
            row[f"{metric} (final)"] = float(values[-1]) if values.size else np.nan
            row[f"{metric} (tail)"] = (float(diagnostics.tail_average(values[:, None], TAIL_QUANTILE)[0])
                                       if values.size else np.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def config_rows(config: Mapping[str, Any], prefix: str = "") -> pd.DataFrame:
    """The resolved config flattened to dotted keys: columns key, value (values as text)."""
    rows: list[tuple[str, str]] = []

    def walk(node: Any, key: str) -> None:
        if isinstance(node, Mapping) and node:
            for name, value in node.items():
                walk(value, f"{key}.{name}" if key else str(name))
        else:
            rows.append((key, str(node) if not isinstance(node, str) else node))

    walk(config, prefix)
    return pd.DataFrame(rows, columns=["key", "value"])


def uniform_weights(run: RunData, tolerance: float = 1e-6) -> bool:
    """True when the run's bin weights are uniform at every logged step (GRPO: no adversary)."""
    if not has_bins(run, "weight"):
        return False
    weight_TG = run.bins["weight"]
    rows = weight_TG[np.isfinite(weight_TG).all(axis=1)]
    return bool(rows.size) and bool(np.allclose(rows, 1.0 / run.num_bins, atol=tolerance))
