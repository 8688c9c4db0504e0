"""Rollout budget and SE proxy of a run as frames (paper Fig. 7-9, Eq. 21 and Eq. 33).

The mean budget n_bar and the arm bounds come from the run's config (any depth) or the paper's
defaults (App. A: 4, 2, 12); the SE proxy is the logged ``se_*`` scalars or
``gdro_lab.functional.diagnostics.se_report`` recomputed from the bins. No Streamlit here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from apps.data.curriculum import bin_labels, has_bins, has_scalar
from gdro_lab.functional import diagnostics
from gdro_lab.runformat.runlog import RunData

#: Paper defaults for Rollout-GDRO (App. A) when a run's config does not say.
PAPER_ROLLOUTS = {"n_bar": 4.0, "n_min": 2.0, "n_max": 12.0}


#: Config keys (searched at any depth) that hold the mean budget and the arm bounds.
ROLLOUT_KEYS = {
    "n_bar": ("n_bar", "mean_rollouts", "rollouts_per_prompt", "rollout_n", "num_rollouts"),
    "n_min": ("n_min", "min_rollouts"),
    "n_max": ("n_max", "max_rollouts"),
}


SE_COLUMNS = ("se_actual", "se_uniform", "se_sqrt", "se_reduction_pct", "se_sqrt_reduction_pct")


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


def prompt_counts(run: RunData) -> np.ndarray | None:
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
    elif has_bins(run, "rollouts") and (counts := prompt_counts(run)) is not None:
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
    counts_TG = prompt_counts(run)
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
