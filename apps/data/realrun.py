"""Real runs: per-benchmark evaluation metrics with their intervals, and the step-time breakdown.

Evaluation names are those of :mod:`real_runs.eval_metrics` (``{bench}/mean@{k}``, ... with
``_lo`` / ``_hi``); step times the ``time/*`` scalars and ``perf/tokens_per_s``. No Streamlit here.
The names in full: docs/app-data-notes.md#apps-data-realrun.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from apps.data import curriculum, results
from gdro_lab.runformat.runlog import RunData

#: ``{scope...}/{stat}@{k}`` with an optional ``_lo`` / ``_hi`` bound.
METRIC_PATTERN = re.compile(r"^(?P<scope>.+)/(?P<stat>mean|pass)@(?P<k>\d+)(?P<bound>_lo|_hi)?$")
#: Scopes that are not a benchmark's name.
SUMMARY_SCOPES = ("pooled", "worst_group", "worst_benchmark")
TIME_PHASES = ("plan", "generate", "reward", "controllers", "logprobs", "update", "sync", "eval")
TIME_TOTAL = "time/step"
#: Running clocks (seconds since the start), not per-step phases.
TIME_CLOCKS = ("time/elapsed",)
TOKENS_PER_S = "perf/tokens_per_s"
EVAL_COLUMNS = ["step", "kind", "name", "stat", "k", "metric", "value", "lo", "hi"]
#: Colours of the summaries, the same on every chart: pooled near-black, worst group red, worst
#: benchmark purple; benchmarks and groups take the other categorical colours.
SUMMARY_COLOURS = {"pooled": "#222222", "worst group": "#d62728", "worst benchmark": "#9467bd"}
OTHER_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")


def eval_colours(names: list[str]) -> dict[str, str]:
    """Colours of an evaluation chart's series: fixed for the summaries, distinct for the rest."""
    others = [name for name in dict.fromkeys(names) if name not in SUMMARY_COLOURS]
    colours = {name: OTHER_COLOURS[index % len(OTHER_COLOURS)] for index, name in enumerate(others)}
    colours.update({name: colour for name, colour in SUMMARY_COLOURS.items() if name in names})
    return colours


def eval_metrics(run: RunData) -> pd.DataFrame:
    """The run's agreed-name evaluation metrics with their bounds, one row per step and metric.

    Columns: step, kind (``benchmark``, ``pooled``, ``worst_group``, ``worst_benchmark`` or
    ``group``), name (benchmark or group name; the kind for summaries), stat (``mean`` or
    ``pass``), k, metric (e.g. ``mean@8``), value, lo, hi (NaN when no bound is logged).
    Names that do not follow the convention are left out (see :func:`apps.data.results.evals_frame`).
    """
    evals = results.evals_frame(run)
    if evals.empty:
        return pd.DataFrame(columns=EVAL_COLUMNS)
    rows: dict[tuple[int, str, str, str, int], dict[str, float]] = {}
    for step, name, value in evals.itertuples(index=False):
        match = METRIC_PATTERN.match(str(name))
        if match is None:
            continue
        scope = match["scope"]
        if scope in SUMMARY_SCOPES:
            kind, label = scope, scope
        elif scope.startswith("group/"):
            kind, label = "group", scope[len("group/"):]
        elif "/" in scope:
            continue
        else:
            kind, label = "benchmark", scope
        key = (int(step), kind, label, match["stat"], int(match["k"]))
        slot = {"_lo": "lo", "_hi": "hi", None: "value"}[match["bound"]]
        rows.setdefault(key, {})[slot] = float(value)
    frame = pd.DataFrame([{"step": step, "kind": kind, "name": label, "stat": stat, "k": k,
                           "metric": f"{stat}@{k}", "value": found.get("value", np.nan),
                           "lo": found.get("lo", np.nan), "hi": found.get("hi", np.nan)}
                          for (step, kind, label, stat, k), found in rows.items()], columns=EVAL_COLUMNS)
    return frame.dropna(subset=["value"]).sort_values(["metric", "kind", "name", "step"]).reset_index(drop=True)


def eval_series(frame: pd.DataFrame, metric: str, kinds: tuple[str, ...] = ("benchmark", *SUMMARY_SCOPES)
                ) -> pd.DataFrame:
    """Long frame for one metric (e.g. ``mean@8``): step, series, value, lo, hi — one series per
    benchmark and one per summary (``pooled``, ``worst group``, ``worst benchmark``)."""
    part = frame[(frame["metric"] == metric) & frame["kind"].isin(kinds)]
    series = part["name"].str.replace("_", " ", regex=False).where(part["kind"] != "benchmark", part["name"])
    return pd.DataFrame({"step": part["step"].astype(float), "series": series, "value": part["value"],
                         "lo": part["lo"], "hi": part["hi"]}).reset_index(drop=True)


def latest_eval_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The last evaluation: one row per benchmark / summary / group, one ``value [lo, hi]`` column per metric."""
    if frame.empty:
        return pd.DataFrame(columns=["kind", "name"])
    last = frame[frame["step"] == frame["step"].max()]
    text = [_interval_text(value, lo, hi) for value, lo, hi in zip(last["value"], last["lo"], last["hi"])]
    table = last.assign(text=text).pivot_table(index=["kind", "name"], columns="metric", values="text",
                                               aggfunc="first")
    order = {"benchmark": 0, "pooled": 1, "worst_benchmark": 2, "worst_group": 3, "group": 4}
    table = table.reset_index()
    table["_order"] = table["kind"].map(order)
    return table.sort_values(["_order", "name"]).drop(columns="_order").reset_index(drop=True)


def _interval_text(value: float, lo: float, hi: float) -> str:
    if np.isfinite(lo) and np.isfinite(hi):
        return f"{value:.3f} [{lo:.3f}, {hi:.3f}]"
    return f"{value:.3f}"


def has_step_times(run: RunData) -> bool:
    """True when the run logs any ``time/*`` scalar."""
    return any(name.startswith("time/") and curriculum.has_scalar(run, name) for name in run.scalars)


def time_phases(run: RunData) -> list[str]:
    """Logged phase scalars in seconds (``time/*`` except the total ``time/step``, and except
    fractions such as ``time/controllers_share``: see :func:`time_fractions`), the agreed phases
    first in order."""
    logged = [name for name in run.scalars if name.startswith("time/") and name not in (TIME_TOTAL, *TIME_CLOCKS)
              and not is_fraction(name) and curriculum.has_scalar(run, name)]
    known = [f"time/{phase}" for phase in TIME_PHASES if f"time/{phase}" in logged]
    return known + sorted(set(logged) - set(known))


def is_fraction(name: str) -> bool:
    """True for a ``time/`` scalar that is a share of the step (``time/controllers_share``), not seconds."""
    return name.rsplit("/", 1)[-1].endswith(("_share", "_frac", "_fraction"))


def time_fractions(run: RunData) -> dict[str, float]:
    """Mean of each logged ``time/*`` fraction (e.g. ``time/controllers_share``) over the run."""
    return {name: float(np.nanmean(run.scalars[name])) for name in sorted(run.scalars)
            if name.startswith("time/") and is_fraction(name) and curriculum.has_scalar(run, name)}


def time_frame(run: RunData) -> pd.DataFrame:
    """Per step and phase the seconds spent: step, phase, seconds (stacked-area input), plus an
    ``other`` phase = time/step − sum of phases when the total is logged and larger."""
    phases = time_phases(run)
    columns = ["step", "phase", "seconds"]
    if not phases:
        return pd.DataFrame(columns=columns)
    values_TP = np.column_stack([np.nan_to_num(run.scalars[name]) for name in phases])
    names = [name.split("/", 1)[1] for name in phases]
    if curriculum.has_scalar(run, TIME_TOTAL):
        other_T = np.nan_to_num(run.scalars[TIME_TOTAL]) - values_TP.sum(axis=1)
        if (other_T > 1e-9).any():
            values_TP = np.column_stack([values_TP, np.clip(other_T, 0.0, None)])
            names.append("other")
    steps = np.repeat(run.steps.astype(float), len(names))
    return pd.DataFrame({"step": steps, "phase": np.tile(np.array(names, dtype=object), run.steps.size),
                         "seconds": values_TP.reshape(-1)}, columns=columns)


def time_table(run: RunData) -> pd.DataFrame:
    """Per phase: mean and total seconds per step and the share of the step (%), largest first."""
    frame = time_frame(run)
    if frame.empty:
        return pd.DataFrame(columns=["phase", "mean s/step", "total s", "share of step (%)"])
    grouped = frame.groupby("phase", sort=False)["seconds"]
    table = pd.DataFrame({"mean s/step": grouped.mean(), "total s": grouped.sum()})
    total = float(table["total s"].sum())
    table["share of step (%)"] = 100.0 * table["total s"] / total if total > 0 else np.nan
    return table.sort_values("total s", ascending=False).reset_index()


def elapsed_seconds(run: RunData) -> np.ndarray | None:
    """Seconds since the run started at each logged step, or None when the run logs no step times.

    ``time/elapsed`` (or ``wall_time``) when logged, else the running sum of ``time/step`` + ``time/eval``
    (docs/app-data-notes.md#apps-data-realrun).
    """
    for name in ("time/elapsed", "wall_time"):
        if curriculum.has_scalar(run, name):
            return np.asarray(run.scalars[name], dtype=float)
    if not curriculum.has_scalar(run, "time/step"):
        return None
    per_step = np.nan_to_num(run.scalars["time/step"])
    if "time/eval" in run.scalars:
        per_step = per_step + np.nan_to_num(run.scalars["time/eval"])
    gaps = np.diff(run.steps, prepend=run.steps[0] - 1 if run.steps.size else 0).clip(min=1)
    return np.cumsum(per_step * gaps)
