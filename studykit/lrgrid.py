"""Learning-rate grids of tuned baselines: steps no coarser than sqrt(2), extended while the best is at an edge.

    grid points   lr_k = base * 2^(k/2)        (consecutive points a factor sqrt(2) apart)
    extension     while a method's best point (on the val split, for any tuned metric) is the
                  lowest (highest) point of its grid, add lowest / sqrt(2) (highest * sqrt(2)),
                  at most ``max_steps`` points beyond each end of the starting grid

A best point still at an edge is reported. Points are rounded to 12 significant digits and snapped to
powers of sqrt(2) within 1e-5. Why: docs/studies-notes.md#studykit-lrgrid.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

from gdro_lab._validate import ConfigError

SQRT2 = math.sqrt(2.0)
#: The coarsest allowed ratio between neighbouring grid points (sqrt(2), with rounding slack).
MAX_RATIO = SQRT2 * (1.0 + 1e-9)


def point(value: float) -> float:
    """A grid value rounded to 12 significant digits (one key per point), snapped to 2^(k/2) when within 1e-5."""
    value = float(value)
    if value > 0:
        k = round(2.0 * math.log2(value))
        if abs(value / 2.0 ** (k / 2.0) - 1.0) < 1e-5:
            value = 2.0 ** (k / 2.0)
    return float(f"{value:.12g}")


def sqrt2_grid(low: float, high: float, base: float = 1.0) -> tuple[float, ...]:
    """Every base * 2^(k/2) in [low, high] (inclusive up to rounding), ascending."""
    if not 0 < low <= high:
        raise ConfigError(f"a learning-rate grid needs 0 < low <= high, got {low}, {high}")
    k_lo = math.ceil(2.0 * math.log2(low / base) - 1e-9)
    k_hi = math.floor(2.0 * math.log2(high / base) + 1e-9)
    return tuple(point(base * 2.0 ** (k / 2.0)) for k in range(k_lo, k_hi + 1))


def check_grid(grid: Sequence[float], flag: str = "--lr-grid") -> tuple[float, ...]:
    """The grid sorted and rounded; one-line ConfigError when a value is not positive or two
    neighbours are more than sqrt(2) apart (a single point is allowed: no tuning)."""
    values = sorted({point(v) for v in grid})
    if not values or values[0] <= 0:
        raise ConfigError(f"{flag}: every learning-rate scale must be > 0, got {list(grid)}")
    for low, high in zip(values, values[1:]):
        if high / low > MAX_RATIO:
            raise ConfigError(f"{flag}: {low:g} and {high:g} are {high / low:.2f}x apart; neighbouring "
                              f"learning rates must be at most sqrt(2) = 1.41x apart (e.g. "
                              f"{','.join(f'{v:g}' for v in sqrt2_grid(low, high))})")
    return tuple(values)


def best(scores: Mapping[float, float]) -> float:
    """The grid point with the highest score (NaN scores lose; ties go to the smaller learning rate)."""
    if not scores:
        raise ValueError("no grid point to choose from")
    return max(sorted(scores), key=lambda lr: (scores[lr] if math.isfinite(scores[lr]) else -math.inf, -lr))


def extension(grid: Sequence[float], bests: Iterable[float], start: Sequence[float],
              max_steps: int = 8) -> list[float]:
    """The points to add to ``grid`` because a best point sits at its edge: lowest / sqrt(2) and/or
    highest * sqrt(2), each only while it stays within ``max_steps`` sqrt(2) steps of the ``start``
    grid's ends. Empty when every best point is inside (or no further step is allowed)."""
    values = sorted(point(v) for v in grid)
    if len(values) < 2 and len(start) < 2:
        return []  # a single point was asked for: no tuning, nothing to extend
    low_limit = min(start) / SQRT2 ** max_steps * (1 - 1e-9)
    high_limit = max(start) * SQRT2 ** max_steps * (1 + 1e-9)
    out = set()
    for lr in bests:
        lr = point(lr)
        if lr == values[0] and values[0] / SQRT2 >= low_limit:
            out.add(point(values[0] / SQRT2))
        if lr == values[-1] and values[-1] * SQRT2 <= high_limit:
            out.add(point(values[-1] * SQRT2))
    return sorted(out)


def at_edge(grid: Sequence[float], lr: float) -> bool:
    """True when ``lr`` is the lowest or highest point of a grid of at least two points."""
    values = sorted(point(v) for v in grid)
    return len(values) > 1 and point(lr) in (values[0], values[-1])
