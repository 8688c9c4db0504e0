"""Studies across seeds: runs grouped (by the config keys that differ, :mod:`apps.data.identity`), mean ± 95% bands.

Per group and step: the mean over seeds ± t_{0.975, S-1} · sd / sqrt(S) (ddof=1, S = seeds logging
that step), clipped to :func:`apps.data.scales.natural_range`; NaN with one seed. The same interval as
the simulator's study reports. No Streamlit here. Detail: docs/app-data-notes.md#apps-data-study.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from apps.data import curriculum, identity, results, scales
from apps.data.groups import Grouping
from gdro_lab.functional import diagnostics
from gdro_lab.runformat.runlog import RunData

#: Keys dropped from a config to find its group (any depth): seeds and bookkeeping (see
#: :data:`apps.data.identity.BOOKKEEPING`).
SEED_KEYS = identity.BOOKKEEPING
#: Metrics of the final-results table, in order (those a study logs; eval metrics are added).
FINAL_METRICS = ("mean_success", "worst_bin_success", "lead_lag_gap", "se_reduction_pct", "effective_support")
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Method:
    """Seeds of one method: a short label, the config key they share, and (run label, run) pairs."""

    label: str
    key: str
    runs: tuple[tuple[str, RunData], ...]

    @property
    def seeds(self) -> int:
        return len(self.runs)


def without_seeds(config: Any) -> Any:
    """The config with every seed key removed, recursively (lists kept in order)."""
    if isinstance(config, Mapping):
        return {str(key): without_seeds(value) for key, value in config.items() if str(key) not in SEED_KEYS}
    if isinstance(config, list):
        return [without_seeds(value) for value in config]
    return config


def method_key(config: Mapping[str, Any]) -> str:
    """Canonical JSON text of the config without seeds: equal for seeds of one method."""
    return json.dumps(without_seeds(config), sort_keys=True, default=str)


def group_runs(runs: Mapping[str, RunData], grouping: Grouping) -> list[Method]:
    """Runs grouped as ``grouping`` says (run label -> group label), in the grouping's order."""
    order = {group.label: index for index, group in enumerate(grouping.groups)}
    groups: dict[str, list[tuple[str, RunData]]] = {}
    for label, run in runs.items():
        groups.setdefault(grouping.group_of.get(label, label), []).append((label, run))
    return [Method(name, name, tuple(members))
            for name, members in sorted(groups.items(), key=lambda item: order.get(item[0], len(order)))]


def group_by_method(runs: Mapping[str, RunData], keys: Sequence[str] | None = None) -> list[Method]:
    """Runs grouped by the config keys that differ between them (or ``keys``): seeds of one group
    together, labelled without hashes (:func:`apps.data.identity.group_runs`)."""
    return group_runs(runs, identity.group_runs({label: run.config for label, run in runs.items()}, keys))


def t_quantile(dof: np.ndarray | int) -> np.ndarray:
    """t_{0.5 + CONFIDENCE/2, dof}, the two-sided 95% Student-t quantile (elementwise)."""
    from scipy import special  # here, not at import: 0.3 s the app's first page does not need

    return np.asarray(special.stdtrit(dof, 0.5 + CONFIDENCE / 2))


def t_interval(values_S: np.ndarray) -> tuple[float, float, float]:
    """(mean, lo, hi) of finite values: mean ± t_{0.975,S-1} sd/sqrt(S); lo = hi = NaN for S < 2."""
    finite = values_S[np.isfinite(values_S)]
    if finite.size == 0:
        return float("nan"), float("nan"), float("nan")
    mean = float(finite.mean())
    if finite.size < 2:
        return mean, float("nan"), float("nan")
    half = float(t_quantile(finite.size - 1) * finite.std(ddof=1) / np.sqrt(finite.size))
    return mean, mean - half, mean + half


#: Fewest seeds a band is drawn for: with 2 seeds the 95% t-quantile is 12.7 and the band fills the
#: metric's whole range, saying nothing.
MIN_BAND_SEEDS = 3
#: Centres of a group's line, and the intervals offered with each (SE and t-interval are the mean's).
CENTRES = ("mean", "median")
INTERVALS = {"mean": ("95% CI", "± 1 SE", "min–max", "none"), "median": ("min–max", "IQR (25–75%)", "none")}


def band_frame(methods: Sequence[Method], metric: str, centre: str = "mean", interval: str = "95% CI",
               min_seeds: int = MIN_BAND_SEEDS) -> pd.DataFrame:
    """Per group and step: the centre over seeds, its interval and the number of seeds ``n``.

    ``centre``: ``mean`` or ``median``; ``interval``: one of :data:`INTERVALS`, clipped to the metric's
    natural range, NaN where fewer than ``min_seeds`` seeds log the step. Columns: step, method (the
    group's label), value, lo, hi, n. The intervals: docs/app-data-notes.md#apps-data-study.
    """
    if interval not in INTERVALS.get(centre, ()):
        raise ValueError(f"interval {interval!r} does not go with the {centre}: choose one of {INTERVALS.get(centre)}")
    columns = ["step", "method", "value", "lo", "hi", "n"]
    parts = []
    for method in methods:
        pairs = [results.metric_series(run, metric) for _, run in method.runs]
        pairs = [(steps, values) for steps, values in pairs if steps.size]
        if not pairs:
            continue
        steps_T = np.unique(np.concatenate([steps for steps, _ in pairs]))
        values_TS = np.full((steps_T.size, len(pairs)), np.nan)
        for column, (steps, values) in enumerate(pairs):
            values_TS[np.searchsorted(steps_T, steps), column] = values
        count_T = np.isfinite(values_TS).sum(axis=1)
        centre_T, lo_T, hi_T = _centre_and_interval(values_TS, count_T, centre, interval)
        shown_T = count_T >= max(min_seeds, 2)
        lo_T, hi_T = np.where(shown_T, lo_T, np.nan), np.where(shown_T, hi_T, np.nan)
        num_bins = max(run.num_bins for _, run in method.runs)
        lo_T, hi_T = scales.clip_band(lo_T, hi_T, scales.natural_range(metric, num_bins, values_TS.reshape(-1)))
        parts.append(pd.DataFrame({"step": steps_T, "method": method.label,
                                   "value": centre_T, "lo": lo_T, "hi": hi_T, "n": count_T}))
    if not parts:
        return pd.DataFrame(columns=columns)
    return pd.concat(parts, ignore_index=True)[columns].dropna(subset=["value"]).reset_index(drop=True)


def _centre_and_interval(values_TS: np.ndarray, count_T: np.ndarray, centre: str, interval: str
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(centre, lo, hi) per step over the seeds' finite values (NaN where undefined)."""
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        mean_T = np.nanmean(values_TS, axis=1)
        centre_T = mean_T if centre == "mean" else np.nanmedian(values_TS, axis=1)
        if interval in ("95% CI", "± 1 SE"):
            se_T = np.nanstd(values_TS, axis=1, ddof=1) / np.sqrt(np.maximum(count_T, 1))
            factor_T = t_quantile(np.maximum(count_T - 1, 1)) if interval == "95% CI" else np.ones_like(se_T)
            half_T = np.where(count_T >= 2, factor_T * se_T, np.nan)
            return centre_T, mean_T - half_T, mean_T + half_T
        if interval == "min–max":
            return centre_T, np.nanmin(values_TS, axis=1), np.nanmax(values_TS, axis=1)
        if interval == "IQR (25–75%)":
            return centre_T, np.nanpercentile(values_TS, 25, axis=1), np.nanpercentile(values_TS, 75, axis=1)
    nan_T = np.full(centre_T.shape, np.nan)
    return centre_T, nan_T, nan_T


def band_note(methods: Sequence[Method], centre: str, interval: str, min_seeds: int = MIN_BAND_SEEDS) -> str:
    """What the bands show, and which groups have too few seeds for one."""
    few = [method.label for method in methods if method.seeds < min_seeds]
    what = f"lines: {centre} over seeds; bands: {interval}" if interval != "none" else f"lines: {centre} over seeds"
    if interval == "none" or not few:
        return what + "."
    listed = ", ".join(few[:5]) + (f" and {len(few) - 5} more" if len(few) > 5 else "")
    return (f"{what}, only for groups of at least {min_seeds} seeds: {len(few)} group{'s' * (len(few) != 1)} "
            f"with fewer get no band ({listed}).")


def _tail(values: np.ndarray) -> float:
    values = values[np.isfinite(values)]
    if values.size == 0:
        return float("nan")
    return float(diagnostics.tail_average(values[:, None], curriculum.TAIL_QUANTILE)[0])


def final_value(run: RunData, metric: str) -> float:
    """A run's final result for a metric: the tail average (≥60th percentile of its logged steps)
    of a step scalar, or the last evaluation's value of an eval metric."""
    _, values = results.metric_series(run, metric)
    if values.size:
        return _tail(values)
    for record in reversed(run.evals):
        metrics = record.get("metrics")
        if isinstance(metrics, Mapping) and isinstance(metrics.get(metric), (int, float)):
            return float(metrics[metric])
    return float("nan")


def final_metrics(methods: Sequence[Method]) -> list[str]:
    """Metrics of the final-results table: study scalars, then the worst-group / pooled eval metrics."""
    runs = [run for method in methods for _, run in method.runs]
    names = [name for name in FINAL_METRICS if any(results.metric_series(run, name)[0].size for run in runs)]
    evals = sorted({name for run in runs for name in results.evals_frame(run)["metric"]})
    headline = [name for name in evals if not name.endswith(("_lo", "_hi"))
                and (name.startswith(("pooled/", "worst_group/", "worst_benchmark/"))
                     or name in ("accuracy", "worst_group_accuracy") or name.startswith(("pass@", "worst_group_pass@")))]
    return names + headline


def final_table(methods: Sequence[Method], metrics: Sequence[str], min_seeds: int = MIN_BAND_SEEDS) -> pd.DataFrame:
    """One row per method: seeds, and per metric ``mean [lo, hi]`` over seeds (95% t-interval,
    clipped to the metric's natural range; only with ``min_seeds`` or more seeds, as the bands:
    ``mean (2 seeds)`` otherwise), with the numbers in hidden-able columns ``{metric}`` /
    ``{metric} lo`` / ``{metric} hi``."""
    rows = []
    for method in methods:
        row: dict[str, Any] = {"method": method.label, "seeds": method.seeds}
        for metric in metrics:
            values = np.array([final_value(run, metric) for _, run in method.runs], dtype=float)
            mean, lo, hi = t_interval(values)
            count = int(np.isfinite(values).sum())
            if count < max(min_seeds, 2):
                lo = hi = float("nan")
            bounds = scales.natural_range(metric, max(run.num_bins for _, run in method.runs), values)
            lo, hi = (float(bound) for bound in scales.clip_band(np.array(lo), np.array(hi), bounds))
            row[metric] = format_interval(mean, lo, hi, count)
            row[f"{metric} mean"], row[f"{metric} lo"], row[f"{metric} hi"] = mean, lo, hi
        rows.append(row)
    return pd.DataFrame(rows)


def format_interval(mean: float, lo: float, hi: float, seeds: int = 1) -> str:
    """``0.512 [0.498, 0.526]``; ``0.512 (2 seeds)`` without an interval; ``n/a`` without a value."""
    if not np.isfinite(mean):
        return "n/a"
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return f"{mean:.4g} ({seeds} seed{'s' * (seeds != 1)})"
    return f"{mean:.4g} [{lo:.4g}, {hi:.4g}]"
