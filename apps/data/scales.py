"""What a number means, for drawing it honestly: a metric's natural range, its kind, sensible axes.

:func:`natural_range` (bands clipped to it by :func:`clip_band`), :func:`metric_kind` (``rate``,
``count``, ``seconds``, ``other``), :func:`y_domain` (at least :data:`MIN_SPAN` of the natural scale,
never outside the natural range), :func:`colour_domain` (anchored at natural scales) and
:func:`heatmap_domain` (a heatmap's scale in the app and in ``gdro report``). No Streamlit
here. Why each: docs/app-data-notes.md#apps-data-scales.
"""

from __future__ import annotations

import math
import re
from typing import Sequence

import numpy as np

#: Names (or their last part) of quantities in [0, 1].
RATE_PATTERN = re.compile(r"(success|accuracy|acc$|pass@|mean@|share|frac|fraction|rate$|_rate|prob|weight$|"
                          r"worst_group|coverage|solved)", re.IGNORECASE)
#: Names of counts (never in a rates panel).
COUNT_PATTERN = re.compile(r"(timeouts?|errors?|count|num_|^n_|total|rollouts$|tokens$|steps$|crashes|retries)",
                           re.IGNORECASE)
#: Smallest axis span, as a fraction of the metric's natural scale.
MIN_SPAN = 0.1
#: Padding on each side of the data, as a fraction of the span.
PAD = 0.05
#: Magnitudes below this are zero up to rounding.
ZERO = 1e-9


def _last(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def metric_kind(name: str, values: Sequence[float] | np.ndarray | None = None) -> str:
    """``rate`` (in [0, 1] by name), ``count``, ``seconds`` (a ``time/`` phase) or ``other``."""
    last = _last(name)
    finite = np.asarray(values if values is not None else [], dtype=float)
    finite = finite[np.isfinite(finite)]
    in_unit = finite.size == 0 or (finite.min() >= 0.0 and finite.max() <= 1.0)
    if RATE_PATTERN.search(last) and in_unit and not COUNT_PATTERN.search(last):
        return "rate"
    if name.startswith("time/"):
        return "rate" if last.endswith(("_share", "_frac")) else "seconds"
    if COUNT_PATTERN.search(last):
        return "count"
    if finite.size and np.all(finite == np.round(finite)) and finite.max() > 1 and "@" not in last:
        return "count"
    return "other"


def natural_range(name: str, num_bins: int | None = None,
                  values: Sequence[float] | np.ndarray | None = None) -> tuple[float, float]:
    """(low, high) a metric cannot leave (±inf where unbounded)."""
    last = _last(name)
    if "effective_support" in last or last.endswith("_support"):
        # exp(entropy) of G weights lies in [1, G]; a support over something else (latent groups)
        # can exceed the bins, so G bounds it only when the data fits
        finite = np.asarray(values if values is not None else [], dtype=float)
        fits = num_bins is not None and bool(np.all(finite[np.isfinite(finite)] <= num_bins + 1e-9))
        return 1.0, float(num_bins) if fits and num_bins else math.inf
    if last.endswith("reduction_pct"):
        return -math.inf, 100.0
    kind = metric_kind(name, values)
    if kind == "rate":
        return 0.0, 1.0
    if kind in ("count", "seconds") or last.startswith(("time/", "perf/")) or "tokens_per_s" in last:
        return 0.0, math.inf
    return -math.inf, math.inf


def clip_band(low: np.ndarray, high: np.ndarray, bounds: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """A band's ``low``/``high`` clipped to the metric's natural range (NaN stays NaN)."""
    lower, upper = bounds
    with np.errstate(invalid="ignore"):
        return np.clip(low, lower, upper), np.clip(high, lower, upper)


def y_domain(values: np.ndarray, bounds: tuple[float, float] = (-math.inf, math.inf),
             zero: bool = False) -> tuple[float, float] | None:
    """An axis range for ``values`` (every series and band of a chart, all columns that share it).

    At least :data:`MIN_SPAN` of the natural scale, padded by :data:`PAD`, inside ``bounds``, with 0 when
    ``zero``; None when there is no finite value. The rule: docs/app-data-notes.md#apps-data-scales.
    """
    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite)]
    if finite.size == 0:
        return None
    low, high = float(finite.min()), float(finite.max())
    if zero:
        low, high = min(low, 0.0), max(high, 0.0)
    lower, upper = bounds
    scale = upper - lower if math.isfinite(upper - lower) else max(abs(low), abs(high))
    if scale < ZERO:  # zero up to rounding (e.g. a reduction of 1e-14 %): an axis around 0, not around noise
        scale = 1.0
    span = max(high - low, MIN_SPAN * scale)
    span *= 1 + 2 * PAD
    centre = (low + high) / 2
    start, end = centre - span / 2, centre + span / 2
    if start < lower:
        start, end = lower, min(upper, lower + span)
    if end > upper:
        start, end = max(lower, upper - span), upper
    if end <= start:
        end = start + 1.0
    return float(start), float(end)


def colour_domain(field: str, values: np.ndarray, n_range: tuple[float, float] | None = None) -> list[float] | None:
    """The colour scale of a per-bin field: its natural range where it has one, else None (min–max).

    ``share``, ``weight``, ``success`` -> [0, 1]; ``reward`` -> [−1, 1]; ``rollouts`` -> [n_min,
    n_max] (``n_range``) widened to the data; ``multiplier`` and ``count`` -> [0, max]."""
    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite)]
    if field in ("share", "weight", "success"):
        return [0.0, 1.0]
    if field == "reward":
        return [-1.0, 1.0]
    if field == "rollouts" and n_range is not None:
        low, high = n_range
        if finite.size:
            low, high = min(low, float(finite.min())), max(high, float(finite.max()))
        return [low, high]
    if field in ("multiplier", "count", "rollouts") and finite.size:
        return [0.0, max(float(finite.max()), 1e-12)]
    return None


#: A heatmap's colour scale: ``auto`` (the values' range, the app's default) or ``natural``.
HEATMAP_MODES = ("auto", "natural")


def heatmap_domain(field: str, values: np.ndarray, mode: str = "auto",
                   n_range: tuple[float, float] | None = None) -> list[float] | None:
    """The colour scale of a heatmap field, the one rule of the app and of ``gdro report``.

    ``auto`` (default): [min, max] of the values, so that 10 weights near 0.1 are not one block of a
    [0, 1] scale; ``natural``: :func:`colour_domain` (else auto). A constant field (GRPO's uniform
    weights) gets :func:`constant_domain`, a scale centred on its value, never a range around noise.
    None when there is no finite value.
    """
    finite = np.asarray(values, dtype=float).reshape(-1)
    finite = finite[np.isfinite(finite)]
    if mode == "natural":
        natural = colour_domain(field, finite, n_range)
        if natural is not None:
            return natural
    if not finite.size:
        return None
    low, high = float(finite.min()), float(finite.max())
    if high - low <= ZERO * max(1.0, abs(high)):
        return constant_domain(field, low, n_range)
    return [low, high]


def constant_domain(field: str, value: float, n_range: tuple[float, float] | None = None) -> list[float]:
    """A colour scale for a field that never changes: centred on ``value``, :data:`MIN_SPAN` of the
    field's natural scale wide (0.1 for weights in [0, 1]: uniform weights 0.1 read 0.05–0.15) and
    inside its natural range; 10% of the value (at least 0.1) where the field has no natural scale."""
    natural = colour_domain(field, np.array([]), n_range)  # a fixed natural range only, never the data's
    lower, upper = (natural[0], natural[1]) if natural is not None and natural[1] > natural[0] else (-math.inf, math.inf)
    span = MIN_SPAN * (upper - lower) if math.isfinite(upper - lower) else max(0.1 * abs(value), 0.1)
    start, end = value - span / 2, value + span / 2
    if start < lower:
        start, end = lower, lower + span
    if end > upper:
        start, end = upper - span, upper
    return [float(start), float(end)]
