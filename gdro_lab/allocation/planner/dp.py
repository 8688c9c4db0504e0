"""Bounded-deviation DP: the exact fallback of :func:`gdro_lab.allocation.planner.exact.exact_plan` (its step 3).

Reduced costs r_b(a) >= 0 (zero on [lo_b, hi_b], the envelope's zero-cost arms), a feasible plan
of cost U and a slack come from the planner; this module returns an optimal plan, exactly, by a
min-plus DP across bins over the total, with per bin at most K_b "free" prompts off lo_b / hi_b
(two bounded-deviation lemmas) and iterative deepening on K_b. The lemmas and the DP:
docs/core-allocation-notes.md#gdro_lab-allocation-planner-dp.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided


def deviation_dp(r_GA: np.ndarray, c_G: np.ndarray, lo_G: np.ndarray, hi_G: np.ndarray, need: int,
                 bound: float, slack: float, heuristic: np.ndarray | None) -> np.ndarray:
    """Prompts per bin and arm x_GA minimising sum_i r(a_i) with sum_i a_i = need (steps 1-3 above).

    ``bound`` is the cost of the feasible plan ``heuristic`` (inf and None when there is none). Iterative
    deepening on the free prompts: docs/core-allocation-notes.md#gdro_lab-allocation-planner-dp.
    """
    num_bins, num_arms = r_GA.shape
    arm = np.arange(num_arms)
    inside = (arm[None, :] > lo_G[:, None]) & (arm[None, :] < hi_G[:, None])
    outside = (arm[None, :] < lo_G[:, None]) | (arm[None, :] > hi_G[:, None])
    delta_in_G = np.where(inside, r_GA, np.inf).min(axis=1)
    delta_out_G = np.where(outside, r_GA, np.inf).min(axis=1)
    interior_G = np.maximum(hi_G - lo_G - 1, 0)
    free_G = _free_needed(bound + slack, c_G, interior_G, delta_in_G, delta_out_G)
    if free_G.max() > 4:  # a loose bound: first solve a narrow family for a tighter one
        free_G = np.minimum(free_G, 2)
    while True:
        tables, choices = _free_tables(r_GA, free_G, bound + slack)
        per_bin = _bin_costs(tables, c_G, lo_G, hi_G, free_G, need, bound + slack)
        order = sorted(range(num_bins), key=lambda g: per_bin[g][1].size)
        cost, steps = _forward(per_bin, order, need, bound + slack)
        if not np.isfinite(cost):  # only by rounding at the bound: the heuristic plan is optimal
            if heuristic is None:
                raise ValueError("exact_plan: no feasible plan (total unreachable)")
            return heuristic
        needed_G = _free_needed(cost + slack, c_G, interior_G, delta_in_G, delta_out_G)
        if np.all(needed_G <= free_G):
            multisets = _backtrack(per_bin, order, steps, choices, c_G, lo_G, hi_G, free_G, need)
            return np.stack([np.bincount(a, minlength=num_arms) for a in multisets])
        free_G = np.maximum(free_G, needed_G)
        bound = min(bound, cost)


def _free_needed(bound: float, c_G: np.ndarray, interior_G: np.ndarray, delta_in_G: np.ndarray,
                 delta_out_G: np.ndarray) -> np.ndarray:
    """Free prompts per bin that certify optimality for plans of cost <= bound (lemmas (a), (b))."""
    with np.errstate(divide="ignore", invalid="ignore"):
        by_cost_in = np.where(delta_in_G > 0, np.floor(bound / delta_in_G), np.inf)
        by_cost_out = np.where(np.isfinite(delta_out_G), np.floor(bound / delta_out_G), 0.0)
    interior = np.minimum(interior_G, by_cost_in)
    return np.minimum(c_G, interior + np.minimum(by_cost_out, c_G)).astype(np.int64)


def _free_tables(r_GA: np.ndarray, free_G: np.ndarray, bound: float) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """tables[k][g, s] = min cost of k prompts of bin g with arm sum s; choices[k] = arm of the k-th.

    Row g is computed for k <= free_G[g] only (inf beyond: never read).
    """
    num_bins, num_arms = r_GA.shape
    tables = [np.zeros((num_bins, 1))]
    choices: list[np.ndarray] = [np.zeros((num_bins, 1), np.int64)]
    reversed_r = r_GA[:, ::-1]
    for k in range(1, int(free_G.max(initial=0)) + 1):
        rows = np.flatnonzero(free_G >= k)
        prev = tables[-1][rows]
        size = prev.shape[1] + num_arms - 1
        padded = np.full((rows.size, prev.shape[1] + 2 * (num_arms - 1)), np.inf)
        padded[:, num_arms - 1: num_arms - 1 + prev.shape[1]] = prev
        # window[g, s, j] = prev[g, s - (A-1) + j] (arm a = A-1-j)
        window = as_strided(padded, (rows.size, size, num_arms), (padded.strides[0], padded.strides[1],
                                                                  padded.strides[1]))
        cand = window + reversed_r[rows, None, :]
        pick = cand.argmin(axis=2)
        best = np.full((num_bins, size), np.inf)
        best[rows] = np.take_along_axis(cand, pick[..., None], axis=2)[..., 0]
        best[best > bound] = np.inf
        choice = np.zeros((num_bins, size), np.int64)
        choice[rows] = num_arms - 1 - pick
        tables.append(best)
        choices.append(choice)
    return tables, choices


def _bin_costs(tables: list[np.ndarray], c_G: np.ndarray, lo_G: np.ndarray, hi_G: np.ndarray,
               free_G: np.ndarray, need: int, bound: float) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """(first t, R_b(t) over t with R_b(t) <= bound, argmin s) per bin; bins with only lo prompts
    besides the free ones (the usual case) read their table row directly, all at once."""
    num_bins = c_G.size
    out: list[tuple[int, np.ndarray, np.ndarray]] = []
    simple = (hi_G == lo_G) | (c_G == free_G)
    size = tables[-1].shape[1]
    rows = np.full((num_bins, size), np.inf)
    for k in np.unique(free_G[simple]).tolist():
        members = simple & (free_G == k)
        rows[members, : tables[k].shape[1]] = tables[k][members]
    base = (c_G - free_G) * lo_G
    rows[np.arange(size)[None, :] > (need - base)[:, None]] = np.inf
    within = rows <= bound
    first = within.argmax(axis=1)
    last = size - 1 - within[:, ::-1].argmax(axis=1)
    empty = np.logical_not(within.any(axis=1))
    for g in range(num_bins):
        if not simple[g]:
            out.append(_bin_cost(tables[int(free_G[g])][g], int(c_G[g]), int(free_G[g]), int(lo_G[g]),
                                 int(hi_G[g] - lo_G[g]), need, bound))
        elif empty[g]:
            out.append((int(base[g]), rows[g, :0], np.zeros(0, np.int64)))
        else:
            out.append((int(base[g] + first[g]), rows[g, first[g]: last[g] + 1],
                        np.arange(first[g], last[g] + 1)))
    return out


def _bin_cost(table: np.ndarray, c: int, free: int, lo: int, width: int, limit: int, bound: float
              ) -> tuple[int, np.ndarray, np.ndarray]:
    """(first t, R_b(t) over the t with R_b(t) <= bound, argmin s) for one bin.

    R_b(t) = min over y in [0, c - free] of table[t - (c - free) lo - y width]: ``free`` prompts
    from the table, y prompts at hi = lo + width, the rest at lo. Empty when nothing is <= bound.
    """
    base = (c - free) * lo
    span = table.size + (c - free) * width  # t - base in [0, span)
    span = max(min(span, limit - base + 1), 0)
    if width == 0 or c == free:
        cost, pick = table[:span], np.arange(span)
    else:
        t = np.arange(span)[:, None]
        s = np.arange(table.size)[None, :]
        y, remainder = np.divmod(t - s, width)
        cand = np.where((remainder == 0) & (y >= 0) & (y <= c - free), table[None, :], np.inf)
        pick = cand.argmin(axis=1)
        cost = cand[np.arange(span), pick]
    finite = np.flatnonzero(cost <= bound)
    if finite.size == 0:
        return base, cost[:0], pick[:0]
    first, last = int(finite[0]), int(finite[-1]) + 1
    return base + first, cost[first:last], pick[first:last]


def _forward(per_bin: list[tuple[int, np.ndarray, np.ndarray]], order: list[int], need: int,
             bound: float) -> tuple[float, list[tuple[int, np.ndarray]]]:
    """Min-plus DP across bins over the total: (min sum_b R_b(t_b) with sum t_b = need, argmin rows).

    Only totals still able to reach ``need`` and reachable from the finite range are computed.
    """
    starts = np.array([per_bin[g][0] for g in order], np.int64)
    widths = np.array([per_bin[g][1].size for g in order], np.int64)
    if np.any(widths == 0):
        return np.inf, []
    fixed = int(np.sum(widths == 1))  # sorted first: one possible total each, no DP step needed
    offset = int(starts[:fixed].sum())
    fixed_cost = float(sum(per_bin[g][1][0] for g in order[:fixed]))
    if offset > need:
        return np.inf, []
    low_after = np.concatenate([np.cumsum(starts[::-1])[::-1][1:], [0]])
    high_after = np.concatenate([np.cumsum((starts + widths - 1)[::-1])[::-1][1:], [0]])
    pad = int((starts + widths).max()) + 1
    buf = np.full(pad + need + 1, np.inf)  # best[tau] = buf[pad + tau]
    spare = buf.copy()
    buf[pad + offset] = fixed_cost
    flo = fhi = offset
    written, spare_written = (pad + offset, pad + offset + 1), (0, 0)  # slices holding values
    steps: list[tuple[int, np.ndarray]] = [(0, np.zeros(1, np.int64))] * fixed
    stride = buf.strides * 2
    for rank in range(fixed, len(order)):
        g = order[rank]
        start, cost = int(starts[rank]), per_bin[g][1][::-1]
        width = cost.size
        lo = max(need - int(high_after[rank]), flo + start)
        hi = min(need - int(low_after[rank]), fhi + start + width - 1)
        if lo > hi:
            return np.inf, []
        # row tau, column j: best[tau - start - (width - 1) + j] + cost[width - 1 - j]
        cand = as_strided(buf[pad + lo - start - (width - 1):], (hi - lo + 1, width), stride) + cost
        pick = cand.argmin(axis=1)
        values = cand.min(axis=1)
        values[values > bound] = np.inf
        finite = np.flatnonzero(values < np.inf)
        if finite.size == 0:
            return np.inf, []
        spare[spare_written[0]: spare_written[1]] = np.inf  # clear what it held two bins ago
        spare[pad + lo: pad + hi + 1] = values
        buf, spare = spare, buf
        written, spare_written = (pad + lo, pad + hi + 1), written
        flo, fhi = lo + int(finite[0]), lo + int(finite[-1])
        steps.append((lo, width - 1 - pick))
    return float(buf[pad + need]), steps


def _backtrack(per_bin: list[tuple[int, np.ndarray, np.ndarray]], order: list[int],
               steps: list[tuple[int, np.ndarray]], choices: list[np.ndarray], c_G: np.ndarray,
               lo_G: np.ndarray, hi_G: np.ndarray, free_G: np.ndarray, need: int) -> list[np.ndarray]:
    """Each bin's total from the DP rows, then its multiset from the free-prompt tables."""
    result: list[np.ndarray] = [np.zeros(0, np.int64)] * c_G.size
    tau = need
    for rank in range(len(order) - 1, -1, -1):
        g = order[rank]
        start, _, pick_s = per_bin[g]
        lo, pick = steps[rank]
        k = 0 if per_bin[g][1].size == 1 else int(pick[tau - lo])
        t = start + k
        tau -= t
        result[g] = _multiset(choices, g, int(free_G[g]), int(pick_s[k]), t, int(c_G[g]), int(lo_G[g]),
                              int(hi_G[g]))
    return result


def _multiset(choices: list[np.ndarray], g: int, free: int, s: int, t: int, c: int, lo: int,
              hi: int) -> np.ndarray:
    """Arms of bin g: the free prompts (backtracked from their table) plus y at hi and the rest at lo."""
    arms = np.empty(c, np.int64)
    for k in range(free, 0, -1):
        arms[k - 1] = choices[k][g, s]
        s -= int(arms[k - 1])
    rest = t - int(arms[:free].sum()) - (c - free) * lo
    y = rest // (hi - lo) if hi > lo else 0
    arms[free:] = lo
    arms[c - y:] = hi
    return np.sort(arms)
