"""Rollout allocation math: the square-root (Neyman) law and exact-budget integer plans.

Paper: Thm 4.2 (Eq. 28-31). Minimise the variance proxy sum_b q_b v_b / n_b subject to
sum_b q_b n_b = n_bar. Unconstrained solution n_b* = n_bar sqrt(v_b) / sum_j q_j sqrt(v_j);
with the arm box n_min <= n_b <= n_max the KKT solution is n_b(mu) = clip(sqrt(v_b / mu)),
with the shadow price mu chosen so that the budget holds; plus rounding to an exact integer total.
Per-bin arm plans: :mod:`gdro_lab.allocation.bin_plans` (importable from here too). Pure; shapes: ``G`` bins, ``P``
prompts, ``A`` arms.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from gdro_lab._validate import ConfigError
from gdro_lab.checks import as_float_array, as_int_array, check_total


def _check_law_inputs(owner: str, variance_G: np.ndarray, share_G: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v_G = as_float_array(owner, "variance_G", variance_G, ndim=1, nonnegative=True)
    q_G = as_float_array(owner, "share_G", share_G, ndim=1, nonnegative=True)
    if q_G.shape != v_G.shape:
        raise ConfigError(f"{owner}: share_G has {q_G.size} bins but variance_G {v_G.size}: must match")
    if not q_G.sum() > 0:
        raise ConfigError(f"{owner}: share_G sums to 0: must have at least one bin with positive share")
    return v_G, q_G


def sqrt_allocation_unclipped(variance_G: np.ndarray, share_G: np.ndarray, n_bar: float) -> np.ndarray:
    """Thm 4.2: n_b* = n_bar sqrt(v_b) / sum_j q_j sqrt(v_j) (real-valued, no arm bounds).

    Bins with q_b = 0 are still given the formula's value (they are outside the active set).
    Raises ValueError when sum_j q_j sqrt(v_j) = 0 (no active bin has variance).
    """
    v_G, q_G = _check_law_inputs("sqrt_allocation_unclipped", variance_G, share_G)
    root_G = np.sqrt(v_G)
    denom = float(np.dot(q_G, root_G))
    if denom <= 0.0:
        raise ConfigError("sqrt_allocation_unclipped: variance_G is 0 on every bin with share: "
                          "must be positive on at least one active bin")
    return n_bar * root_G / denom


def sqrt_allocation(variance_G: np.ndarray, share_G: np.ndarray, n_bar: float,
                    n_min: float, n_max: float) -> np.ndarray:
    """Square-root law with the arm box: argmin sum q v / n s.t. sum q n = n_bar, n_min <= n <= n_max.

    KKT: n_b = clip(sqrt(v_b / mu), n_min, n_max), mu solved exactly (with n_min = 0 and n_max = inf,
    the unclipped law). Needs 0 <= n_min <= n_bar <= n_max (n_max may be inf). Bins with v_b = 0 share
    what the others leave of the budget: n_min unless every other bin is at n_max. The solve:
    docs/core-allocation-notes.md#gdro_lab-allocation-sqrt_law.
    """
    owner = "sqrt_allocation"
    v_G, q_G = _check_law_inputs(owner, variance_G, share_G)
    check_box(owner, n_bar, n_min, n_max)
    return sqrt_law(v_G, q_G, n_bar, n_min, n_max)


def sqrt_law(v_G: np.ndarray | list[float], q_G: np.ndarray | list[float], n_bar: float, n_min: float,
             n_max: float) -> np.ndarray:
    """:func:`sqrt_allocation` on checked float arrays (unchecked; the step record's SE optimum calls this).

    Lists of Python floats (the step record's per-step call, G ~ 10 bins) take a walk over the knots in
    plain Python, where numpy's per-call cost exceeds the arithmetic; equal to the array solve up to
    rounding (tests/gdro_lab/allocation/test_sqrt_law.py).
    """
    if isinstance(v_G, list) and isinstance(q_G, list):
        return np.array(_sqrt_law_walk(v_G, q_G, n_bar, n_min, n_max))
    v_G, q_G = np.asarray(v_G, float), np.asarray(q_G, float)
    total_q = q_G.sum()
    root_G = np.sqrt(v_G)
    shared = q_G > 0
    live = shared & (root_G > 0)
    if not live.any():
        return np.full_like(v_G, float(n_bar))  # no variance anywhere: every plan is equal; keep uniform
    root_live = root_G[live]
    knots = np.concatenate([n_min / root_live, n_max / root_live]) if math.isfinite(n_max) else n_min / root_live
    knots.sort()
    knots = knots[np.concatenate([[True], knots[1:] != knots[:-1]])]  # = np.unique
    # the budget f(s) at each knot (np.clip = minimum(maximum))
    values = np.minimum(np.maximum(knots[:, None] * root_G[None, :], n_min), n_max) @ q_G / total_q
    if n_bar <= values[-1]:
        s_star = float(np.interp(n_bar, values, knots))
    else:  # n_max = inf: past the last knot every live bin is free, f is linear with this slope
        slope = float(q_G[live] @ root_live) / total_q
        s_star = float(knots[-1] + (n_bar - values[-1]) / slope)
    n_G = np.minimum(np.maximum(root_G * s_star, n_min), n_max)
    silent = shared != live  # q > 0 and v = 0
    if silent.any():
        # Zero-variance bins cost nothing at any n: they take whatever budget the others leave
        # (the others may all sit at n_max), so the budget still holds exactly when feasible.
        rest = n_bar * total_q - float(q_G[live] @ n_G[live])
        n_G[silent] = np.clip(rest / q_G[silent].sum(), n_min, n_max)
    return n_G


def _sqrt_law_walk(v_G: list[float], q_G: list[float], n_bar: float, n_min: float, n_max: float) -> list[float]:
    """:func:`sqrt_law`'s fast path on lists: the budget walked knot by knot, np.interp's formula at the
    crossing. The walk: docs/core-allocation-notes.md#gdro_lab-allocation-sqrt_law."""
    total_q = sum(q_G)
    root = [math.sqrt(v) for v in v_G]
    live = [q > 0 and r > 0 for q, r in zip(q_G, root)]
    if not any(live):
        return [float(n_bar)] * len(v_G)
    events = sorted([(n_min / r, 0, b) for b, r in enumerate(root) if live[b]]
                    + ([(n_max / r, 1, b) for b, r in enumerate(root) if live[b]] if math.isfinite(n_max) else []))
    fixed = sum(q for q in q_G if q > 0) * n_min  # sum of q n over bins at a bound (all at n_min for small s)
    slope = 0.0                                    # sum of q sqrt(v) over bins in the linear part
    s_prev = f_prev = math.nan  # the last knot passed and the budget there (none yet)
    s_star: float | None = None
    for knot, kind, b in events:
        f_knot = (fixed + slope * knot) / total_q
        if knot == s_prev:
            pass  # a repeated knot: np.unique keeps one
        elif f_knot > n_bar:
            # np.interp: before the first knot it clamps, else it interpolates on [s_prev, knot]
            s_star = knot if math.isnan(s_prev) else (knot - s_prev) / (f_knot - f_prev) * (n_bar - f_prev) + s_prev
            break
        else:
            s_prev, f_prev = knot, f_knot
        q, r = q_G[b], root[b]
        if kind == 0:
            fixed -= q * n_min
            slope += q * r
        else:
            slope -= q * r
            fixed += q * n_max
    if s_star is None:
        if n_bar == f_prev:
            s_star = s_prev
        else:  # past the last knot (n_max = inf, or n_bar above the budget of all bins at n_max)
            rate = sum(q * r for q, r, ok in zip(q_G, root, live) if ok) / total_q
            s_star = s_prev + (n_bar - f_prev) / rate
    n_G = [min(max(r * s_star, n_min), n_max) for r in root]
    silent = [q > 0 and not ok for q, ok in zip(q_G, live)]
    if any(silent):
        rest = n_bar * total_q - sum(q * n for q, n, ok in zip(q_G, n_G, live) if ok)
        fill = min(max(rest / sum(q for q, quiet in zip(q_G, silent) if quiet), n_min), n_max)
        n_G = [fill if quiet else n for n, quiet in zip(n_G, silent)]
    return n_G


@functools.lru_cache(maxsize=64)
def check_box(owner: str, n_bar: float, n_min: float, n_max: float) -> None:
    """0 <= n_min <= n_bar <= n_max, all finite except n_max (may be inf)."""
    def real(x: object) -> bool:
        return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and not math.isnan(x)
    if not (real(n_min) and math.isfinite(n_min) and n_min >= 0):
        raise ConfigError(f"{owner}: n_min={n_min!r} is invalid: must be a finite number >= 0")
    if not (real(n_max) and n_max >= n_min):
        raise ConfigError(f"{owner}: n_max={n_max!r} is invalid: must be a number >= n_min={n_min} (inf allowed)")
    if not (real(n_bar) and math.isfinite(n_bar) and n_min <= n_bar <= n_max):
        raise ConfigError(f"{owner}: n_bar={n_bar!r} is invalid: must be a finite number in "
                          f"[n_min, n_max]=[{n_min}, {n_max}]")


def round_to_budget(target_P: np.ndarray, total: int, n_min: int, n_max: int) -> np.ndarray:
    """Integer n_P in [n_min, n_max] with sum exactly ``total``, closest to real ``target_P``.

    Largest-remainder rounding: floor everything, then give +1 to the prompts with the largest
    fractional parts (ties: lowest index) until the total is met; bounds are respected.
    """
    target = np.clip(as_float_array("round_to_budget", "target_P", target_P, ndim=1), n_min, n_max)
    count = target.size
    total = check_total("round_to_budget", total, count, n_min, n_max)
    base = np.floor(target).astype(np.int64)
    return adjust_to_total(base, total, n_min, n_max, preference_P=target - base)


def adjust_to_total(n_P: np.ndarray, total: int, n_min: int, n_max: int,
                    preference_P: np.ndarray | None = None) -> np.ndarray:
    """Move single prompts by +-1 until sum(n_P) == total, within [n_min, n_max].

    Prompts with the highest ``preference_P`` are raised first and those with the lowest are
    lowered first (stable order); passes repeat when one step each is not enough.
    """
    n = as_int_array("adjust_to_total", "n_P", n_P, ndim=1).copy()
    total = check_total("adjust_to_total", total, n.size, n_min, n_max)
    pref = np.zeros(n.size) if preference_P is None else as_float_array("adjust_to_total", "preference_P",
                                                                         preference_P, ndim=1)
    gap = int(total - n.sum())
    order_up = np.argsort(-pref, kind="stable")
    order_down = np.argsort(pref, kind="stable")
    while gap != 0:
        if gap > 0:
            room = order_up[n[order_up] < n_max]
            if room.size == 0:
                raise ValueError("budget unreachable: every prompt is already at n_max")
            chosen = room[:gap]
            n[chosen] += 1
            gap -= chosen.size
        else:
            room = order_down[n[order_down] > n_min]
            if room.size == 0:
                raise ValueError("budget unreachable: every prompt is already at n_min")
            chosen = room[:-gap]
            n[chosen] -= 1
            gap += chosen.size
    return n

