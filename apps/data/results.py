"""Outcomes, evaluations, comparisons across runs and the flat config of a run, as frames.

Training outcomes (mean and worst-group success, effective support: ``gdro_lab.functional.diagnostics``),
evaluation records, one scalar over several runs (the lead-lag gap recomputed by Eq. 32), final
values and tail averages, and the resolved config flattened to dotted keys. No Streamlit here.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from apps.data.budget import prompt_counts
from apps.data.curriculum import TAIL_QUANTILE, has_bins, has_scalar, lead_lag_arrays, lead_lag_frame
from gdro_lab.functional import diagnostics
from gdro_lab.runformat.runlog import RunData

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


BOUND_SUFFIXES = ("_lo", "_hi")


def is_bound(name: str, names: Iterable[str]) -> bool:
    """True for ``X_lo`` / ``X_hi`` when ``X`` is a metric too: the bounds of an interval, drawn as
    its band, not as series of their own."""
    return name.endswith(BOUND_SUFFIXES) and name[:-3] in set(names)


def headline_metrics(names: Iterable[str]) -> list[str]:
    """Metric names without the interval bounds of other metrics (sorted)."""
    names = list(dict.fromkeys(names))
    known = set(names)
    return sorted(name for name in names if not is_bound(name, known))


def pass_at_k_metrics(evals: pd.DataFrame) -> list[str]:
    """Eval metric names of the pass@k family (``pass@8``, ``worst_group_pass@8``...), sorted; bounds left out."""
    if evals.empty:
        return []
    return [name for name in headline_metrics(evals["metric"]) if "pass@" in name]


def accuracy_metrics(evals: pd.DataFrame) -> list[str]:
    """Eval metric names of the accuracy family (``accuracy``, ``worst_group_accuracy``...), sorted; bounds left out."""
    if evals.empty:
        return []
    return [name for name in headline_metrics(evals["metric"]) if "accuracy" in name and "pass@" not in name]


def _last_per_step(steps: np.ndarray, metrics: np.ndarray, values: np.ndarray, name: str
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of one eval metric, steps ascending, the last record of a step kept."""
    keep = metrics == name
    steps, values = steps[keep], values[keep]
    order = np.argsort(steps, kind="stable")
    steps, values = steps[order], values[order]
    last = np.append(steps[1:] != steps[:-1], True) if steps.size else np.zeros(0, dtype=bool)
    return steps[last], values[last]


def with_bounds(evals: pd.DataFrame, names: Sequence[str], series: str = "series") -> pd.DataFrame:
    """Long frame (step, <series>, value, lo, hi) of eval metrics ``names``: ``lo``/``hi`` from
    ``{name}_lo``/``{name}_hi`` at the same step (NaN when not logged). Read with numpy (a pivot
    per run took 0.8 s of Compare at 50 runs)."""
    columns = ["step", series, "value", "lo", "hi"]
    if evals.empty or not names:
        return pd.DataFrame(columns=columns)
    steps = evals["step"].to_numpy(dtype=float)
    metrics = evals["metric"].to_numpy(dtype=object)
    values = evals["value"].to_numpy(dtype=float)
    parts = []
    for name in names:
        at, value = _last_per_step(steps, metrics, values, name)
        keep = ~np.isnan(value)
        if not keep.any():
            continue
        at, value = at[keep], value[keep]
        part = {"step": at, series: name, "value": value}
        for bound in ("lo", "hi"):
            bound_at, bound_value = _last_per_step(steps, metrics, values, f"{name}_{bound}")
            if bound_at.size:
                index = np.searchsorted(bound_at, at).clip(max=bound_at.size - 1)
                part[bound] = np.where(bound_at[index] == at, bound_value[index], np.nan)
            else:
                part[bound] = np.full(at.size, np.nan)
        parts.append(pd.DataFrame(part))
    if not parts:
        return pd.DataFrame(columns=columns)
    return pd.concat(parts, ignore_index=True)[columns]


def _last_per_run_step(order: np.ndarray, steps: np.ndarray, values: np.ndarray, chosen: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(run index, step, value) of the ``chosen`` rows, the last record per run and step, sorted."""
    order, steps, values = order[chosen], steps[chosen], values[chosen]
    index = np.lexsort((steps, order))  # stable: records of one step stay in file order
    order, steps, values = order[index], steps[index], values[index]
    last = np.append((order[1:] != order[:-1]) | (steps[1:] != steps[:-1]), True) if order.size else order.astype(bool)
    return order[last], steps[last], values[last]


def bounds_by_run(evals: Mapping[str, pd.DataFrame], name: str, names: Mapping[str, str]) -> pd.DataFrame:
    """Long frame (step, run, value, lo, hi) of eval metric ``name`` over runs (label -> its
    :func:`evals_frame`), ``run`` the run's name from ``names``: what :func:`with_bounds` gives per
    run, in one pass over every run's records (50 runs: 0.15 s of Compare's script in 50 calls)."""
    columns = ["step", "run", "value", "lo", "hi"]
    frames = [frame for frame in evals.values() if not frame.empty]
    if not frames:
        return pd.DataFrame(columns=columns)
    rows = pd.concat(frames, ignore_index=True)
    labels = [label for label, frame in evals.items() if not frame.empty]
    order = np.repeat(np.arange(len(frames)), [len(frame) for frame in frames])
    steps = rows["step"].to_numpy(dtype=np.int64)
    metrics = rows["metric"].to_numpy(dtype=object)
    values = rows["value"].to_numpy(dtype=float)
    at_order, at_step, value = _last_per_run_step(order, steps, values, metrics == name)
    keep = ~np.isnan(value)
    at_order, at_step, value = at_order[keep], at_step[keep], value[keep]
    if not value.size:
        return pd.DataFrame(columns=columns)
    low, span = int(steps.min()), int(steps.max() - steps.min()) + 1
    key = at_order * span + (at_step - low)  # one sortable number per run and step
    ends = {}
    for bound in ("lo", "hi"):
        bound_order, bound_step, bound_value = _last_per_run_step(order, steps, values, metrics == f"{name}_{bound}")
        bound_key = bound_order * span + (bound_step - low)
        if bound_key.size:
            index = np.searchsorted(bound_key, key).clip(max=bound_key.size - 1)
            ends[bound] = np.where(bound_key[index] == key, bound_value[index], np.nan)
        else:
            ends[bound] = np.full(key.size, np.nan)
    return pd.DataFrame({"step": at_step.astype(float), "run": [names[labels[index]] for index in at_order],
                         "value": value, "lo": ends["lo"], "hi": ends["hi"]}, columns=columns)


def latest_evals(evals: pd.DataFrame) -> pd.DataFrame:
    """The last evaluation's metrics: columns metric, value, and lo, hi when any interval is logged."""
    if evals.empty:
        return pd.DataFrame(columns=["metric", "value", "lo", "hi"])
    last = evals[evals["step"] == evals["step"].max()]
    names = headline_metrics(last["metric"])
    values = dict(zip(last["metric"], last["value"]))
    table = pd.DataFrame({"metric": names, "value": [values[name] for name in names],
                          "lo": [values.get(f"{name}_lo", np.nan) for name in names],
                          "hi": [values.get(f"{name}_hi", np.nan) for name in names]})
    return table if table[["lo", "hi"]].notna().any().any() else table[["metric", "value"]]


def scalar_names(runs: Iterable[RunData]) -> list[str]:
    """Scalars logged by any of the runs, the usual comparison metrics first; interval bounds
    (``X_lo``/``X_hi`` of a logged ``X``) left out: they are drawn as ``X``'s band."""
    names = headline_metrics({name for run in runs for name in run.scalars if has_scalar(run, name)})
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
    """One scalar over steps for several runs: columns step, run, value, and lo, hi when the runs
    log ``{metric}_lo``/``{metric}_hi`` (lead-lag recomputed per Eq. 32). Built as one frame from
    numpy arrays (a frame per run took 0.7 s of Compare at 50 runs)."""
    steps, labels, values = [], [], []
    bounds: dict[str, list[np.ndarray]] = {"lo": [], "hi": []}
    logged = {"lo": False, "hi": False}
    for label, run in runs.items():
        if metric == "lead_lag_gap":
            arrays = lead_lag_arrays(run) or {"step": np.zeros(0, dtype=object), "gap": np.zeros(0)}  # as an empty frame
            at, value = np.asarray(arrays["step"]), np.asarray(arrays["gap"], dtype=float)
            ends: dict[str, np.ndarray | None] = {"lo": None, "hi": None}
        elif has_scalar(run, metric):
            at, value = run.steps, np.asarray(run.scalars[metric], dtype=float)
            ends = {bound: np.asarray(run.scalars[f"{metric}_{bound}"], dtype=float)
                    if has_scalar(run, f"{metric}_{bound}") else None for bound in ("lo", "hi")}
        else:
            continue
        keep = ~np.isnan(value)
        steps.append(at[keep])
        values.append(value[keep])
        labels.append(np.full(int(keep.sum()), label, dtype=object))
        for bound, end in ends.items():
            logged[bound] |= end is not None
            bounds[bound].append(end[keep] if end is not None else np.full(int(keep.sum()), np.nan))
    if not steps:
        return pd.DataFrame(columns=["step", "run", "value"])
    columns: dict[str, Any] = {"step": np.concatenate(steps), "run": pd.array(np.concatenate(labels), dtype="str"),
                               "value": np.concatenate(values)}
    columns.update({bound: np.concatenate(bounds[bound]) for bound in ("lo", "hi") if logged[bound]})
    return pd.DataFrame(columns)


def _logged_values(run: RunData, metric: str) -> np.ndarray:
    """The values :func:`compare_frame` keeps for one run and metric, in step order, as numpy (the
    NaNs left out; empty when the run does not log it)."""
    if metric == "lead_lag_gap":
        arrays = lead_lag_arrays(run)
        values = np.asarray(arrays["gap"], dtype=float) if arrays is not None else np.zeros(0)
    elif has_scalar(run, metric):
        values = np.asarray(run.scalars[metric], dtype=float)
    else:
        return np.array([])
    return values[~np.isnan(values)]


def compare_table(runs: Mapping[str, RunData], metrics: Sequence[str]) -> pd.DataFrame:
    """Per run: steps logged and, per metric, the final value and the tail average (≥60th pct of steps).

    The values are those of :func:`compare_frame`, read as numpy arrays (one frame per run and
    metric took 1.3 s at 50 runs)."""
    rows = []
    for label, run in runs.items():
        row: dict[str, Any] = {"run": label, "steps": int(run.steps.size)}
        for metric in metrics:
            values = _logged_values(run, metric)
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


def allocator_of(config: Mapping[str, Any]) -> str | None:
    """The rollout allocator a run's config names (``resolved.allocator`` of the simulator,
    ``method.allocator`` of the trainer, or any key ending in ``allocator`` that holds a name);
    None when the config names none (then nothing is claimed about it)."""
    rows = config_rows(config)
    for key, value in zip(rows["key"], rows["value"]):
        if (key == "allocator" or key.endswith(".allocator")) and isinstance(value, str) and value and value != "{}":
            return value
    return None
