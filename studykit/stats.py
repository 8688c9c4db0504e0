"""Statistics of study reports: t-intervals over seeds, paired and relative gains, the bootstrap.

Shapes: ``S`` seeds. ``mean ± half`` with half = t_{(1 + level)/2, S-1} sd / sqrt(S) (ddof = 1), NaN
ignored (NaN with fewer than two finite values); *paired* gains over the per-seed differences,
*relative* gains 100 (M_s / B_s - 1) per seed; the percentile bootstrap for statistics without a
t-interval (equal to ``scipy.stats.bootstrap(..., method="percentile")`` for the same draws). Detail:
docs/studies-notes.md#studykit-stats.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np
from scipy import stats as sps


def mean_ci(values: Any, axis: int = 0, level: float = 0.95) -> tuple[Any, Any]:
    """(mean, half-width) of the Student-t interval over ``axis``, NaN-aware; half NaN with < 2 values."""
    arr = np.asarray(values, float)
    count = np.sum(np.isfinite(arr), axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices give NaN, not a warning
        mean = np.nanmean(arr, axis=axis)
        sd = np.nanstd(arr, axis=axis, ddof=1)
        quantile = sps.t.ppf((1.0 + level) / 2.0, np.maximum(count - 1, 1))
        half = np.where(count >= 2, quantile * sd / np.sqrt(np.maximum(count, 1)), np.nan)
    if np.ndim(mean) == 0:
        return float(mean), float(half)
    return mean, half


def paired_ci(method_S: Any, base_S: Any, level: float = 0.95) -> tuple[float, float]:
    """(mean, half) of the per-seed differences method_S - base_S (same seeds, same order)."""
    a, b = np.asarray(method_S, float), np.asarray(base_S, float)
    if a.shape != b.shape:
        raise ValueError(f"paired values need the same seeds: shapes {a.shape} and {b.shape}")
    mean, half = mean_ci(a - b, level=level)
    return float(mean), float(half)


def relative_gain_ci(method_S: Any, base_S: Any, level: float = 0.95) -> tuple[float, float]:
    """(mean, half) in percent of the per-seed relative gains 100 (method_s / base_s - 1); seeds with a
    non-positive baseline are left out (NaN)."""
    a, b = np.asarray(method_S, float), np.asarray(base_S, float)
    if a.shape != b.shape:
        raise ValueError(f"paired values need the same seeds: shapes {a.shape} and {b.shape}")
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.where(b > 0, 100.0 * (a / np.where(b > 0, b, 1.0) - 1.0), np.nan)
    mean, half = mean_ci(rel, level=level)
    return float(mean), float(half)


def bootstrap_ci(values: Any, statistic: Callable[[np.ndarray], float] = np.mean, level: float = 0.95,
                 resamples: int = 9999, seed: int = 0) -> tuple[float, float, float]:
    """(statistic of the data, low, high): the percentile bootstrap over the first axis (NaN rows dropped).

    ``statistic`` maps an array of resampled values (n, ...) to a float; its draws use
    ``numpy.random.default_rng(seed)``, so the interval is reproducible.
    """
    arr = np.asarray(values, float)
    arr = arr[np.all(np.isfinite(arr.reshape(arr.shape[0], -1)), axis=1)] if arr.size else arr
    if arr.shape[0] < 2:
        estimate = float(statistic(arr)) if arr.shape[0] else float("nan")
        return estimate, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    index = rng.integers(0, arr.shape[0], size=(resamples, arr.shape[0]))
    draws = np.array([statistic(arr[row]) for row in index], float)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(draws, [alpha, 1.0 - alpha])
    return float(statistic(arr)), float(low), float(high)


def excludes_zero(mean: float, half: float) -> bool:
    """True when the interval mean ± half lies entirely on one side of 0 (False when undefined)."""
    return bool(np.isfinite(mean) and np.isfinite(half) and abs(mean) > half)
