"""The curriculum of a run as frames: bins and scalars, traveling-wave heatmaps and snapshots, lead-lag.

Conventions: per-bin arrays of a run have shape (T, G), scalars (T,); bin 0 is the hardest bin.
Long frames (one row per step and series) are returned for charts; a field a run does not log
gives an empty frame, never an exception. The paper's diagnostics (Eq. 32 lead-lag gap, Fig. 1
tail averages, Fig. 5 snapshots) come from ``gdro_lab.functional.diagnostics``. No Streamlit here.
"""

from __future__ import annotations

import math
import warnings
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from gdro_lab.functional import diagnostics
from gdro_lab.runformat.runlog import RunData

#: Heatmaps of longer runs average blocks of consecutive steps down to this many columns
#: (the app asks for fewer, see ``apps.views.ui.heatmap_columns``: browsers draw every cell).
HEATMAP_MAX_COLUMNS = 300


#: Fig. 1 bars: mean over the steps at or after this quantile of the step range.
TAIL_QUANTILE = 0.6


TAIL_LABEL = "tail average"


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


def lead_lag_frame(run: RunData) -> pd.DataFrame:
    """Eq. 32 per step: columns step, gap, mu_weight, mu_data (from the share and weight bins).

    Uses ``diagnostics.lead_lag_gap`` on the logged bins, skipping steps where no prompt is in a
    bin yet (the data's mean bin is undefined there); when a run logs only the scalars
    ``lead_lag_gap``/``mu_weight``/``mu_data``, those are used. Empty when neither exists.
    """
    columns = ["step", "gap", "mu_weight", "mu_data"]
    arrays = lead_lag_arrays(run)
    return pd.DataFrame(arrays, columns=columns) if arrays is not None else pd.DataFrame(columns=columns)


def lead_lag_arrays(run: RunData) -> dict[str, np.ndarray] | None:
    """The columns of :func:`lead_lag_frame` as numpy arrays (shape (T',) each; None when the run has
    neither the bins nor the scalars): Compare asks it of 50 runs twice per visit, without a frame."""
    if has_bins(run, "share") and has_bins(run, "weight"):
        # diagnostics.lead_lag_gap for every step at once: index · normalised weights / shares.
        share_TG, weight_TG = np.nan_to_num(run.bins["share"]), np.nan_to_num(run.bins["weight"])
        share_T, weight_T = share_TG.sum(axis=1), weight_TG.sum(axis=1)
        keep = (share_T > 0) & (weight_T > 0)
        index_G = np.arange(run.num_bins, dtype=float)
        mu_weight = (weight_TG[keep] @ index_G) / weight_T[keep]
        mu_data = (share_TG[keep] @ index_G) / share_T[keep]
        return {"step": run.steps[keep].astype(int), "gap": mu_weight - mu_data, "mu_weight": mu_weight,
                "mu_data": mu_data}
    if has_scalar(run, "lead_lag_gap"):
        nan = np.full(run.steps.size, np.nan)
        return {"step": run.steps, "gap": run.scalars["lead_lag_gap"], "mu_weight": run.scalars.get("mu_weight", nan),
                "mu_data": run.scalars.get("mu_data", nan)}
    return None


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
