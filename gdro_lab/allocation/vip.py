"""Variance-proportional convex allocation (VIP, arXiv 2602.01601) and the square-root law per prompt.

With w_i = p_i (1 - p_i), the exact integer optimum of

    min_n sum_i w_i / (n_i - c)   s.t.   sum_i n_i = total,   n_min <= n_i <= n_max

for c = 1 (VIP's RLOO variance) or c = 0 (Eq. 28's v / n: Thm 4.2's square-root law per prompt):
:func:`sqrt_law_relaxed` solves the KKT conditions exactly, :func:`round_relaxed` rounds to the integer
optimum. Departs from VIP:
- the Dr.GRPO variance form is not offered, because it is not convex on n in [2, 3];
- the controller uses a per-prompt Beta posterior instead of VIP's Gaussian process, because VIP's code is not public.
Derivation: docs/core-allocation-notes.md#gdro_lab-allocation-vip.
"""

from __future__ import annotations

import numpy as np

from gdro_lab._validate import ConfigError
from gdro_lab.checks import as_float_array, check_total


def beta_expected_variance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """E[p (1 - p)] under Beta(a, b) = a b / ((a + b)(a + b + 1)) (a, b > 0)."""
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    s = a + b
    return a * b / (s * (s + 1.0))


def _objective(weights_P: np.ndarray, n_P: np.ndarray, offset: float) -> np.ndarray:
    return weights_P / (np.asarray(n_P, float) - offset)


def sqrt_law_relaxed(weights_P: np.ndarray, total: float, n_min: float, n_max: float,
                     offset: float = 0.0) -> np.ndarray:
    """Real n_P minimising sum_i w_i / (n_i - offset), sum n = total, n in [n_min, n_max] (exact).

    ``offset`` < n_min (0: Eq. 28's v / n; 1: VIP's RLOO variance). Prompts with w_i = 0 (any
    n is optimal for them) share what the others leave: n_min unless every other is at n_max.
    The budget f(s) = sum_i clip(offset + r_i s) (r = sqrt(w)) is evaluated at its sorted breakpoints
    by a sweep (each breakpoint adds or removes one prompt's slope r_i): O(P log P).
    """
    w = as_float_array("sqrt_law_relaxed", "weights_P", weights_P, ndim=1, nonnegative=True)
    size = w.size
    if not size * n_min - 1e-9 <= total <= size * n_max + 1e-9:
        raise ConfigError(f"sqrt_law_relaxed: total={total:g} is outside [{size * n_min:g}, {size * n_max:g}] "
                          f"for {size} prompts: must be between n_min and n_max rollouts per prompt")
    root = np.sqrt(w)
    live = root > 0
    n_P = np.full(size, float(n_min))
    if not live.any():
        return np.full(size, total / max(size, 1))
    r = root[live]
    # events: at s = (n_min - c) / r a prompt starts growing (slope + r, constant c - n_min); at
    # s = (n_max - c) / r it stops (slope - r, constant n_max - c); before any event f = P n_min
    knots = np.concatenate([(n_min - offset) / r, (n_max - offset) / r])
    slope_step = np.concatenate([r, -r])
    const_step = np.concatenate([np.full(r.size, offset - n_min), np.full(r.size, n_max - offset)])
    order = np.argsort(knots, kind="stable")
    knots, slope, const = knots[order], np.cumsum(slope_step[order]), size * n_min + np.cumsum(const_step[order])
    budget = const + slope * knots  # f just after each knot (f is continuous)
    index = int(np.searchsorted(budget, total - 1e-12))
    if index >= knots.size:
        s_star = float(knots[-1])
    elif index == 0:
        s_star = float(knots[0])
    else:  # linear on [knots[index-1], knots[index]] with the slope after knots[index-1]
        s_star = float(knots[index - 1] + (total - budget[index - 1]) / max(slope[index - 1], 1e-300))
    n_P[live] = np.clip(offset + root[live] * s_star, n_min, n_max)
    silent = ~live
    if silent.any():
        rest = total - float(n_P[live].sum())
        n_P[silent] = np.clip(rest / silent.sum(), n_min, n_max)
    return n_P


def round_relaxed(relaxed_P: np.ndarray, weights_P: np.ndarray, total: int, n_min: int, n_max: int,
                  offset: float = 0.0) -> np.ndarray:
    """Exact integer optimum of the same program from its relaxed solution (int64, sum = total).

    floor(relaxed) clipped to the box, then the total - sum(floor) increments with the largest
    decrease w_i / (n_i - offset) - w_i / (n_i + 1 - offset), ties to the earlier prompt.
    """
    w = as_float_array("round_relaxed", "weights_P", weights_P, ndim=1, nonnegative=True)
    total = check_total("round_relaxed", total, w.size, n_min, n_max)
    base = np.clip(np.floor(np.asarray(relaxed_P, float) + 1e-9), n_min, n_max).astype(np.int64)
    need = total - int(base.sum())
    while need != 0:  # float error only: at most a step or two
        step = 1 if need > 0 else -1
        can = base < n_max if step > 0 else base > n_min
        gain = np.where(can, step * (_objective(w, base, offset) - _objective(w, base + step, offset)), -np.inf)
        take = min(abs(need), int(can.sum()))
        kth = gain.size - take
        threshold = np.partition(gain, kth)[kth]
        chosen = gain > threshold
        chosen[np.flatnonzero(gain == threshold)[: take - int(chosen.sum())]] = True
        base[chosen] += step
        need -= step * take
    return base


def convex_plan(weights_P: np.ndarray, total: int, n_min: int, n_max: int, offset: float = 0.0
                ) -> tuple[np.ndarray, np.ndarray]:
    """(integer plan, relaxed plan) of min sum_i w_i / (n_i - offset) under the exact budget."""
    relaxed = sqrt_law_relaxed(weights_P, total, n_min, n_max, offset)
    return round_relaxed(relaxed, weights_P, total, n_min, n_max, offset), relaxed
