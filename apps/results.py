"""Outcomes, evaluations, comparisons across runs and the flat config of a run, as frames.

Training outcomes (mean and worst-group success, effective support: ``gdro_lab.diagnostics``),
evaluation records, one scalar over several runs (the lead-lag gap recomputed by Eq. 32), final
values and tail averages, and the resolved config flattened to dotted keys. No Streamlit here.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from apps.budget import prompt_counts
from apps.curriculum import TAIL_QUANTILE, has_bins, has_scalar, lead_lag_frame
from gdro_lab import diagnostics
from gdro_lab.runlog import RunData

#: Scalars the Compare page shows by default, then those it offers next (then all others).
COMPARE_DEFAULTS = ("mean_success", "worst_bin_success", "lead_lag_gap", "se_reduction_pct")


COMPARE_NEXT = ("effective_support", "mu", "mean_rollouts")


def outcomes_frame(run: RunData) -> pd.DataFrame:
    """Training outcomes per step: mean_success, worst_bin_success, effective_support.

    Logged scalars first; otherwise computed from the bins with ``diagnostics.worst_group``
    (over the success bins) and ``diagnostics.effective_support`` (over the weight bins).
    """
    frame = pd.DataFrame({"step": run.steps})
    if has_scalar(run, "mean_success"):
        frame["mean_success"] = run.scalars["mean_success"]
    elif has_bins(run, "success") and (counts := prompt_counts(run)) is not None:
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
