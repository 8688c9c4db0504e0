"""The exact planner's step 2: the relaxation over shifts and a feasible plan
(:mod:`gdro_lab.allocation.planner.exact`).

Inputs: reduced costs r_b(a) >= 0 (zero exactly on lo_b..hi_b), the prompts per bin c_b and ``need``.
:func:`relaxed_plan` is a lower bound, the optimum when its multiset fits the bins' counts;
:func:`feasible_plan` an upper bound. Shapes: ``G`` bins, ``A`` arms; plans are x_GA. The method:
docs/core-allocation-notes.md#gdro_lab-allocation-planner-exact.
"""

from __future__ import annotations

import functools
import math
import operator

import numpy as np

from gdro_lab._rows import cached_arange, row_min


def relaxed_plan(r_GA: np.ndarray, move_GA: np.ndarray, c_G: np.ndarray, lo_G: np.ndarray, hi_G: np.ndarray,
                 need: int, critical: list[int], rounds: int) -> tuple[float, np.ndarray | None]:
    """(Lower bound on the optimal cost, the optimal x_GA when the relaxation's optimum fits the bins).

    ``move_GA`` is r_GA with inf at the zero-cost arms (no move); ``critical`` the bins with hi_b > lo_b
    (at most one; every bin's zero-cost arms are exactly lo_b and hi_b). Stops after ``rounds`` costly
    prompts unless fewer are proven optimal; (a lower bound, None) when the rounds ran out or the
    relaxed optimum uses more prompts of a bin than it has.
    """
    num_bins, num_arms = r_GA.shape
    padded = np.empty((num_bins, 3 * num_arms - 2))
    padded.fill(np.inf)
    padded[:, num_arms - 1: 2 * num_arms - 1] = move_GA
    rows, shifts = _shift_layout(num_bins, num_arms)
    cost = padded.ravel().take((rows + lo_G)[:, None] + shifts)  # cost[g, d + A - 1] = r_g(lo_g + d), inf: none
    payer = cost.argmin(axis=0)
    m_D = cost[payer, cached_arange(cost.shape[1])]
    width = int(hi_G[critical[0]] - lo_G[critical[0]]) if critical else 1
    targets = (need - int(c_G @ lo_G), width, int(c_G[critical[0]]) if critical else 0)  # D - width h, h = 0..h_max
    lower, high, moves = _shortest_shift(m_D.tolist(), targets, rounds)
    if moves is None:
        return lower, None
    x_GA = np.zeros((num_bins, num_arms), np.int64)
    x_GA.ravel()[rows // (3 * num_arms - 2) * num_arms + lo_G] = c_G  # every prompt at lo_b (= _two_arms, high 0)
    if critical:  # h prompts of the critical bin at its hi
        g = critical[0]
        x_GA[g, lo_G[g]] -= high
        x_GA[g, hi_G[g]] += high
    for d in moves:
        g = int(payer[d + num_arms - 1])
        at = int(lo_G[g])
        if x_GA[g, at] == 0:
            return lower, None  # the relaxed optimum uses more prompts of bin g than it has
        x_GA[g, at] -= 1
        x_GA[g, at + d] += 1
    return lower, x_GA


def relaxed_plan_lists(r_GA: list[list[float]], c_G: list[int], need: int, tol: float) -> np.ndarray | None:
    """:func:`relaxed_plan` with 12 rounds on the reduced costs as lists (zero-cost arms: r <= tol), for the
    usual step: the same plan when it succeeds with the relaxation; None when the caller must take the full
    path (zero-cost arms other than lo_b and hi_b, several critical bins, a multiset that does not fit, or
    rounds that ran out). Python floats (G ~ 10 bins of A ~ 11 arms); the shift search is
    :func:`_shortest_shift`, whose Bellman-Ford layers start from this table when two shifts do not decide."""
    num_arms = len(r_GA[0])
    mid = num_arms - 1
    inf = math.inf
    m = [inf] * (2 * num_arms - 1)
    payer = [0] * (2 * num_arms - 1)
    lo_G: list[int] = []
    hi_G: list[int] = []
    critical: list[int] = []
    for g, row in enumerate(r_GA):
        zeros = [a for a, value in enumerate(row) if value <= tol]
        lo, hi = zeros[0], zeros[-1]
        if len(zeros) != (2 if hi > lo else 1) or (hi > lo and critical):
            return None  # not the simple case (zero cost strictly inside, or a second critical bin)
        if hi > lo:
            critical.append(g)
        lo_G.append(lo)
        hi_G.append(hi)
        base = mid - lo
        for a, value in enumerate(row):  # m(d) = min over bins of r_b(lo_b + d), the first bin on ties
            if tol < value < m[base + a]:
                m[base + a] = value
                payer[base + a] = g
    start = need - sum(c * lo for c, lo in zip(c_G, lo_G))
    width = hi_G[critical[0]] - lo_G[critical[0]] if critical else 1
    h_max = c_G[critical[0]] if critical else 0
    _, high, moves = _shortest_shift(m, (start, width, h_max), 12)
    if moves is None:
        return None
    x_GA = [[0] * num_arms for _ in c_G]
    for arms_row, c, lo in zip(x_GA, c_G, lo_G):
        arms_row[lo] = c
    if critical:
        g = critical[0]
        x_GA[g][lo_G[g]] -= high
        x_GA[g][hi_G[g]] += high
    for d in moves:
        g = payer[d + mid]
        at = lo_G[g]
        if x_GA[g][at] == 0:
            return None  # the relaxed optimum uses more prompts of bin g than it has
        x_GA[g][at] -= 1
        x_GA[g][at + d] += 1
    return np.array(x_GA, np.int64)


def _shortest_shift(m: list[float], targets: tuple[int, int, int], rounds: int) -> tuple[float, int, list[int] | None]:
    """Cheapest multiset of shifts d (cost m[d + A - 1] each, any number) summing to a target
    t = start - width h, h in 0..h_max, with at most ``rounds`` shifts unless that is proven optimal:
    (cost, h, shifts); (a lower bound, 0, None) when a cheaper plan could use more shifts.
    The search: docs/core-allocation-notes.md#gdro_lab-allocation-planner-relax.
    """
    start, width, h_max = targets
    arms = (len(m) + 1) // 2
    cheapest = min(m)
    low = max(-(arms - 1) * rounds, min(0, start - width * h_max) - arms + 1)
    top = min((arms - 1) * rounds, max(0, start) + arms - 1)
    h_lo, h_hi = max(0, -((top - start) // width)), min(h_max, (start - low) // width)
    if h_lo > h_hi or top < 0 or low > 0:
        return (rounds + 1) * cheapest, 0, None
    if rounds >= 2 and (few := _few_shifts(m, start, width, h_lo, h_hi, cheapest)) is not None:
        return few  # the usual bandit step: decided within two shifts (the same answer)
    return _bellman_ford(np.array(m), targets, (low, top, h_lo, h_hi), rounds, cheapest)


def _bellman_ford(m_D: np.ndarray, targets: tuple[int, int, int], bounds: tuple[int, int, int, int], rounds: int,
                  cheapest: float) -> tuple[float, int, list[int] | None]:
    """:func:`_shortest_shift` by Bellman-Ford layers on arrays, within ``bounds`` = (low, top, h_lo, h_hi) (checked
    non-empty by the caller); ``cheapest`` = min(m_D)."""
    start, width, _ = targets
    low, top, h_lo, h_hi = bounds
    arms = (m_D.size + 1) // 2
    stop = start - low - width * h_hi - 1
    span = slice(start - low - width * h_lo, stop if stop >= 0 else None, -width)
    size = top - low + 1
    dist = np.empty(size + 2 * (arms - 1))
    dist.fill(np.inf)
    core = dist[arms - 1: arms - 1 + size]  # core[s - low]: min cost of shift s
    core[-low] = 0.0
    window = np.ndarray((size, m_D.size), float, dist, strides=dist.strides * 2)  # shift A-1-j
    reversed_m = m_D[::-1].copy()
    layers, best, k = [core.copy()], float(np.minimum.reduce(core[span])), 0
    while best > (k + 1) * cheapest:  # a plan with more than k shifts might be cheaper
        if k == rounds:
            return (rounds + 1) * cheapest, 0, None
        if k == 0:  # one shift from 0: m itself (0 + m = m; m(0) = inf keeps the 0)
            core[-low - arms + 1: -low + arms] = m_D
            core[-low] = 0.0
            k = 1
        else:  # only sums within (k + 1)(A - 1) of 0 can change (the others stay inf)
            reach = slice(max(0, -low - (k + 1) * (arms - 1)), -low + (k + 1) * (arms - 1) + 1)
            old = core[reach]
            new = np.minimum(row_min(window[reach] + reversed_m), old)
            k = k + 1 if np.logical_or.reduce(new < old) else rounds  # a fixed point (new <= core): more rounds change nothing
            core[reach] = new
        layers.append(core.copy())
        best = float(np.minimum.reduce(core[span]))
    if not np.isfinite(best):
        return best, 0, None
    h = h_lo + int(core[span].argmin())
    s, moves = start - width * h - low, []
    for k in range(len(layers) - 1, 0, -1):
        if layers[k][s] == layers[k - 1][s]:
            continue
        core[:] = layers[k - 1]
        d = arms - 1 - int((window[s] + reversed_m).argmin())
        moves.append(d)
        s -= d
    return best, h, moves


def _few_shifts(m: list[float], start: int, width: int, h_lo: int, h_hi: int, cheapest: float
                ) -> tuple[float, int, list[int]] | None:
    """:func:`_bellman_ford`'s result when its search ends within two shifts, on Python floats (the same
    layers, the same sums, the same ties: the lowest h, then the largest shift); None when it needs more.
    """
    if cheapest == math.inf:
        return None
    arms = (len(m) + 1) // 2
    mid = arms - 1
    if start % width == 0 and h_lo <= start // width <= h_hi:  # k = 0: shift 0 is a target
        return 0.0, start // width, []
    one = m.copy()
    one[mid] = 0.0  # L1
    first, last = max(h_lo, -((mid - start) // width)), min(h_hi, (start + mid) // width)
    values = [one[start - width * h + mid] for h in range(first, last + 1)]
    best = min(values, default=math.inf)
    if best <= 2 * cheapest:  # k = 1: one shift (the target itself)
        h = first + values.index(best)
        return best, h, [start - width * h]
    first, last = max(h_lo, -((2 * mid - start) // width)), min(h_hi, (start + 2 * mid) // width)
    def pairs(x: int) -> list[float]:
        """L1(x - d) + m(d) for the shifts d with |x - d| <= A - 1, d descending."""
        low, high = max(-mid, x - mid), min(mid, x + mid)
        return list(map(operator.add, one[x - high + mid: x - low + mid + 1], m[low + mid: high + mid + 1][::-1]))

    values = []
    for h in range(first, last + 1):  # k = 2: L2 at each target within two shifts
        x = start - width * h
        two = min(pairs(x))
        values.append(min(two, one[x + mid]) if -mid <= x <= mid else two)
    best = min(values, default=math.inf)
    if not best <= 3 * cheapest:
        return None
    h = first + values.index(best)
    x = start - width * h
    if -mid <= x <= mid and one[x + mid] == best:  # L2 = L1 here: layer 2 is skipped, layer 1 holds one shift
        return best, h, ([x] if x else [])
    costs = pairs(x)
    d = min(mid, x + mid) - costs.index(min(costs))  # the first minimum, d descending: the largest d
    return best, h, [d] + ([x - d] if x != d else [])


@functools.lru_cache(maxsize=64)
def _shift_layout(num_bins: int, num_arms: int) -> tuple[np.ndarray, np.ndarray]:
    """(row offsets g (3A - 2), shifts 0..2A-2) into the padded (G, 3A - 2) cost table of ``relaxed_plan``."""
    rows = np.arange(num_bins) * (3 * num_arms - 2)
    shifts = np.arange(2 * num_arms - 1)
    rows.flags.writeable = shifts.flags.writeable = False
    return rows, shifts


def feasible_plan(r_GA: np.ndarray, c_G: np.ndarray, lo_G: np.ndarray, hi_G: np.ndarray,
              need: int) -> tuple[float, np.ndarray | None]:
    """Cost and prompts per arm x_GA of a good feasible plan (its cost bounds the optimum's, step 2).

    (inf, None) when none is found; the DP then runs unpruned. The construction:
    docs/core-allocation-notes.md#gdro_lab-allocation-planner-relax.
    """
    num_bins, num_arms = r_GA.shape
    width_G = hi_G - lo_G
    y_G = np.zeros(num_bins, np.int64)
    left = need - int(c_G @ lo_G)
    if left < 0:
        return np.inf, None
    for critical in np.flatnonzero(width_G > 0).tolist():
        y_G[critical] = min(int(c_G[critical]), left // int(width_G[critical]))
        left -= int(y_G[critical] * width_G[critical])
    best = (np.inf, -1, -1, 0, -1)  # cost, bin, from-arm, shift, bin given one more hi
    if left:
        # candidate moves: shift `left` (extra = -1) or left - width_h after one more hi in bin h
        extras = np.concatenate([[-1], np.flatnonzero((width_G > left) & (c_G - y_G > 0))])
        shifts = left - np.where(extras >= 0, width_G[np.maximum(extras, 0)], 0)      # (M,)
        position = np.stack([lo_G, hi_G])                                              # (2, G)
        count = np.stack([c_G - y_G, y_G])
        target = position[None] + shifts[:, None, None]                                # (M, 2, G)
        ok = ((count > 0)[None] & (target >= 0) & (target < num_arms)
              & (np.arange(num_bins)[None, None, :] != extras[:, None, None]))
        cost = np.where(ok, r_GA[np.arange(num_bins)[None, None, :], np.clip(target, 0, num_arms - 1)], np.inf)
        flat = int(cost.argmin())
        if not np.isfinite(cost.flat[flat]):
            return np.inf, None
        move, side, pick = np.unravel_index(flat, cost.shape)
        best = (float(cost.flat[flat]), int(pick), int(position[side, pick]), int(shifts[move]), int(extras[move]))
    x_GA = _two_arms(num_arms, c_G, lo_G, hi_G, y_G + (np.arange(num_bins) == best[4]))
    if left:
        x_GA[best[1], best[2]] -= 1
        x_GA[best[1], best[2] + best[3]] += 1
    return (best[0] if left else 0.0), x_GA


def _two_arms(num_arms: int, c_G: np.ndarray, lo_G: np.ndarray, hi_G: np.ndarray, high_G: np.ndarray) -> np.ndarray:
    """x_GA with high_G prompts of each bin at hi_G and the rest at lo_G."""
    x_GA = np.zeros((c_G.size, num_arms), np.int64)
    rows = np.arange(c_G.size)
    x_GA[rows, lo_G] = c_G - high_G
    x_GA[rows, hi_G] += high_G
    return x_GA
