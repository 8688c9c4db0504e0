"""Strict checks of array inputs at the public boundaries (one-line errors, never silent garbage).

Every check raises :class:`ConfigError` (a ``ValueError``) whose single line names the function,
the argument, what was wrong and what is allowed, e.g.
``pass_at_k: n is invalid (non-integer value 4.9): must be integers``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gdro_lab._validate import ConfigError


def _fail(owner: str, name: str, problem: str, allowed: str) -> None:
    raise ConfigError(f"{owner}: {name} is invalid ({problem}): must be {allowed}")


def as_float_array(owner: str, name: str, values: Any, *, ndim: int | None = None,
                   allow_nan: bool = False, allow_neg_inf: bool = False, nonnegative: bool = False,
                   nonempty: bool = False) -> np.ndarray:
    """Float array of real numbers; NaN / inf rejected unless allowed; optional ndim / sign / size."""
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        _fail(owner, name, "not numeric", "an array of real numbers")
    if ndim is not None and array.ndim != ndim:
        _fail(owner, name, f"shape {array.shape}", f"a {ndim}-D array")
    if nonempty and array.size == 0:
        _fail(owner, name, "empty", "a non-empty array")
    if not allow_nan and np.isnan(array).any():
        _fail(owner, name, "contains NaN", "finite numbers")
    if np.isposinf(array).any() or (not allow_neg_inf and np.isneginf(array).any()):
        _fail(owner, name, "contains inf", "finite numbers")
    if nonnegative and (array < 0).any():
        _fail(owner, name, f"min {np.nanmin(array):g} < 0", "non-negative numbers")
    return array


def as_int_array(owner: str, name: str, values: Any, *, ndim: int | None = None,
                 low: int | None = None) -> np.ndarray:
    """Integer-valued array (ints, or floats with integral values; bools rejected) as int64."""
    raw = np.asarray(values)
    if raw.dtype == bool or raw.dtype.kind not in "iuf":
        _fail(owner, name, f"dtype {raw.dtype}", "integers")
    if ndim is not None and raw.ndim != ndim:
        _fail(owner, name, f"shape {raw.shape}", f"a {ndim}-D array of integers")
    if raw.dtype.kind == "f":
        if not np.isfinite(raw).all():
            _fail(owner, name, "contains NaN or inf", "integers")
        if (raw != np.round(raw)).any():
            bad = raw[raw != np.round(raw)].flat[0]
            _fail(owner, name, f"non-integer value {bad:g}", "integers")
    array = raw.astype(np.int64)
    if low is not None and array.size and array.min() < low:
        _fail(owner, name, f"min {array.min()} < {low}", f"integers >= {low}")
    return array


def as_int(owner: str, name: str, value: Any, low: int | None = None) -> int:
    """A single integer (int or integral float; not bool, NaN or inf), >= low when given."""
    ok = isinstance(value, (int, np.integer, float, np.floating)) and not isinstance(value, (bool, np.bool_))
    if not ok or not math.isfinite(value) or value != int(value):
        _fail(owner, name, f"got {value!r}", "an integer")
    if low is not None and int(value) < low:
        _fail(owner, name, f"got {value!r}", f"an integer >= {low}")
    return int(value)


def check_bins(owner: str, name: str, bins: Any, num_bins: int, *, allow_unassigned: bool = True) -> np.ndarray:
    """1-D integer bins in [-1, num_bins) (or [0, num_bins) when unassigned prompts are not allowed).

    An int64 array already in range is returned as it is (the controllers' per-step call: checked by its
    minimum and maximum alone); anything else is converted (a new int64 array) and checked."""
    low = -1 if allow_unassigned else 0
    if isinstance(bins, np.ndarray) and bins.dtype == np.int64 and bins.ndim == 1:
        if not bins.size or (np.minimum.reduce(bins) >= low and np.maximum.reduce(bins) < num_bins):
            return bins
    array = as_int_array(owner, name, bins, ndim=1)
    if array.size and (array.min() < low or array.max() >= num_bins):
        bad = array[(array < low) | (array >= num_bins)][0]
        allowed = f"integers in [{low}, {num_bins})" + (" (-1 = unassigned)" if allow_unassigned else "")
        _fail(owner, name, f"bin {bad}", allowed)
    return array


def check_log_prob(owner: str, log_prob_GA: Any) -> np.ndarray:
    """(G, A) log-probabilities: finite or -inf, at least one arm."""
    array = as_float_array(owner, "log_prob_GA", log_prob_GA, ndim=2, allow_neg_inf=True)
    if array.shape[1] == 0:
        _fail(owner, "log_prob_GA", "no arms", "an array of shape (bins, arms >= 1)")
    return array


def check_total(owner: str, total: Any, size: int, n_min: int, n_max: int) -> int:
    """Integer total rollouts within [size n_min, size n_max]."""
    value = as_int(owner, "total", total)
    if not size * n_min <= value <= size * n_max:
        _fail(owner, "total", f"{value} outside [{size * n_min}, {size * n_max}] for {size} prompts",
              f"between {n_min} and {n_max} rollouts per prompt")
    return value
