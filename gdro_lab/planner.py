"""Exact per-prompt rollout planner for any arm distributions (§3.3, "joint probability").

Problem. P prompts, prompt i in bin b(i); arms a = 0..A-1 stand for n = n_min + a rollouts and
f_b(a) = log p_b(n_min + a) (any values: concave or not). Find

    max sum_i f_b(i)(a_i)   s.t.   sum_i a_i = need := total - P n_min,   0 <= a_i <= A-1.

Prompts of one bin are interchangeable, so this is a grouped resource allocation. The method is
exact for any f and fast when f is near concave (full feedback) or spiky (bandit feedback):

1. Lagrangian. With the LP dual lambda (the slope of the concave envelope of the f_b at which the
   greedy on envelope increments stops), reduced costs r_b(a) = phi_b - f_b(a) + lambda a >= 0,
   phi_b = max_a f_b(a) - lambda a, turn the objective into
       sum_i f = sum_b c_b phi_b + lambda need - sum_i r_b(i)(a_i),
   so the task is: minimise sum_i r(a_i) s.t. sum_i a_i = need. Per bin the zero-cost arms
   form an interval [lo_b, hi_b] of the envelope (lo_b = hi_b for all but the critical bins).
2. A feasible plan (y prompts at hi_b, at most one interior prompt per critical bin, the rest at
   lo_b) has cost U; an optimal plan has cost <= U.
3. Bounded deviations (the two lemmas that make this exact). In an optimal plan, per bin:
   (a) at most L_b - 1 prompts sit strictly inside (lo_b, hi_b), L_b = hi_b - lo_b, WLOG: among
   any L_b interior prompts a subset of size <= L_b has offset sum = m L_b (prefix sums mod
   L_b, pigeonhole), and it can be replaced by m prompts at hi_b and the rest at lo_b: same
   count, same total, reduced cost 0 <= theirs (r is 0 at lo_b and hi_b, >= 0 elsewhere);
   (b) every prompt outside [lo_b, hi_b] costs at least delta_b = min_{a outside} r_b(a) > 0,
   so at most floor(U / delta_b) of them.
   Hence K_b = min(c_b, L_b - 1 + floor(U / delta_b)) "free" prompts plus c_b - K_b prompts
   at lo_b or hi_b cover an optimal plan.
4. Per bin, D_b[s] = min cost of K_b free prompts with arm sum s (a small DP over k <= K_b),
   R_b(t) = min_y D_b[t - (c_b - K_b) lo_b - y L_b] over y in [0, c_b - K_b]; then a min-plus DP
   across bins over the total (only t with R_b(t) <= U), and a backtrack.

Everything is vectorised with numpy; at the paper's scale (256 prompts, 10 bins, 11 arms) a plan
takes well under a millisecond in both feedback modes (docs/benchmarks.md). Tested against brute
force and scipy.optimize.milp (tests/test_planner_exact.py).

Departs from the paper: the paper's DP chooses one arm per bin (``allocation.exact_budget_plan``,
offered with both objectives); this planner maximises the joint probability over prompts.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from gdro_lab.allocation import concave_envelope, forbidden_floor, tie_broken
from gdro_lab.checks import check_bins, check_log_prob, check_total


def exact_plan(log_prob_GA: np.ndarray, bins_P: np.ndarray, total: int, n_min: int, *,
               tie_center: float | None = None) -> np.ndarray:
    """Exact argmax of sum_i log p_b(i)(n_i) s.t. sum_i n_i = total, n_i in n_min..n_min+A-1.

    ``log_prob_GA[b, a]`` = log p_b(n_min + a), finite or -inf (-inf arms are never used; a
    ValueError if the total cannot be met without them); ``bins_P`` in [0, G) for every prompt.
    ``tie_center`` adds 1e-9 (n - tie_center)^2 to the cost so that equally likely plans resolve
    toward that value. Returns n_P (int64). Within a bin, prompts get arms in ascending order of
    their position in the batch (they are interchangeable). Cost: see the module docstring.
    """
    values, arms = tie_broken(check_log_prob("exact_plan", log_prob_GA), n_min, tie_center)
    num_bins, num_arms = values.shape
    bins = check_bins("exact_plan", "bins_P", bins_P, num_bins, allow_unassigned=False)
    size = bins.size
    check_total("exact_plan", total, size, n_min, n_min + num_arms - 1)
    if size == 0:
        return np.zeros(0, np.int64)
    need = int(total) - size * n_min
    counts_all = np.bincount(bins, minlength=num_bins)
    present = np.flatnonzero(counts_all > 0)
    finite = values[np.isfinite(values)]
    scale = float(np.abs(finite).max()) if finite.size else 0.0
    f_GA, forbidden = forbidden_floor(values[present], size)
    arms_G = _solve(f_GA, counts_all[present].astype(np.int64), need, scale)
    # arms_G[g] is the sorted multiset of arm indices for present bin g
    n_P = np.empty(size, np.int64)
    position = np.full(num_bins, -1, np.int64)
    position[present] = np.arange(present.size)
    order = np.argsort(bins, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts_all)[:-1]])
    for g, b in enumerate(present):
        members = order[starts[b]: starts[b] + counts_all[b]]
        n_P[members] = arms_G[g]
        if forbidden[g, arms_G[g]].any():
            raise ValueError(f"exact_plan: no plan with total {total} avoids arms of probability 0 "
                             f"(bin {b}); allow more arms or change the total")
    return n_min + n_P


def _solve(f_GA: np.ndarray, c_G: np.ndarray, need: int, scale: float) -> list[np.ndarray]:
    """Sorted arm multiset per bin maximising sum f with sum of arms = need (finite f).

    Iterative deepening on the number of free prompts: solve within the family with K_b free
    prompts, take the found plan's cost as U, and stop once U certifies (step 3 of the module
    docstring) that no bin needs more free prompts than it was given; else widen and repeat.
    """
    num_bins, num_arms = f_GA.shape
    if num_arms == 1:
        return [np.zeros(c, np.int64) for c in c_G]
    arm = np.arange(num_arms)
    lam = _dual(f_GA, c_G, need)
    adjusted = f_GA - lam * arm
    r_GA = np.maximum(adjusted.max(axis=1, keepdims=True) - adjusted, 0.0)
    tol = 1e-12 * (1.0 + scale + abs(lam) * num_arms)
    zero = r_GA <= tol
    lo_G = zero.argmax(axis=1)
    hi_G = num_arms - 1 - zero[:, ::-1].argmax(axis=1)
    r_GA[zero] = 0.0
    inside = (arm[None, :] > lo_G[:, None]) & (arm[None, :] < hi_G[:, None])
    outside = (arm[None, :] < lo_G[:, None]) | (arm[None, :] > hi_G[:, None])
    delta_in_G = np.where(inside, r_GA, np.inf).min(axis=1)
    delta_out_G = np.where(outside, r_GA, np.inf).min(axis=1)
    interior_G = np.maximum(hi_G - lo_G - 1, 0)
    bound, heuristic = _feasible(r_GA, c_G, lo_G, hi_G, need)
    free_G = np.minimum(c_G, 1)
    while True:
        slack = bound + tol * (c_G.sum() + 1)
        tables, choices = _free_tables(r_GA, int(free_G.max()), slack)
        plan = _combine(tables, choices, c_G, lo_G, hi_G, free_G, need, slack, heuristic)
        cost = float(sum(r_GA[g, arms].sum() for g, arms in enumerate(plan)))
        needed_G = _free_needed(cost + tol * (c_G.sum() + 1), c_G, interior_G, delta_in_G, delta_out_G)
        if np.all(needed_G <= free_G):
            return plan
        free_G = np.maximum(free_G, needed_G)
        bound, heuristic = min(bound, cost), plan


def _free_needed(bound: float, c_G: np.ndarray, interior_G: np.ndarray, delta_in_G: np.ndarray,
                 delta_out_G: np.ndarray) -> np.ndarray:
    """Free prompts per bin that certify optimality for plans of cost <= bound (lemmas (a), (b))."""
    with np.errstate(divide="ignore", invalid="ignore"):
        by_cost_in = np.where(delta_in_G > 0, np.floor(bound / delta_in_G), np.inf)
        by_cost_out = np.where(np.isfinite(delta_out_G), np.floor(bound / delta_out_G), 0.0)
    interior = np.minimum(interior_G, by_cost_in)
    return np.minimum(c_G, interior + np.minimum(by_cost_out, c_G)).astype(np.int64)


def _envelope(f_GA: np.ndarray) -> np.ndarray:
    """Upper concave envelope of finite rows: max over chords (i <= a <= j), vectorised, O(G A^3)."""
    num_arms = f_GA.shape[1]
    idx = np.arange(num_arms, dtype=float)
    i, j, a = idx[:, None, None], idx[None, :, None], idx[None, None, :]
    span = np.where(j > i, j - i, 1.0)
    weight = np.where((i <= a) & (a <= j) & (j > i), (a - i) / span, np.nan)  # (A, A, A)
    fi, fj = f_GA[:, :, None, None], f_GA[:, None, :, None]
    chords = fi + (fj - fi) * weight[None]
    return np.maximum(np.nanmax(chords.reshape(f_GA.shape[0], -1, num_arms), axis=1), f_GA)


def _dual(f_GA: np.ndarray, c_G: np.ndarray, need: int) -> float:
    """LP dual lambda: the gain of the need-th largest concave-envelope increment (with multiplicity)."""
    gains = np.diff(_envelope(f_GA), axis=1).ravel()
    mult = np.repeat(c_G, f_GA.shape[1] - 1)
    order = np.argsort(-gains, kind="stable")
    cumulative = np.cumsum(mult[order])
    index = int(np.searchsorted(cumulative, max(need, 1)))
    return float(gains[order[min(index, order.size - 1)]])


def _feasible(r_GA: np.ndarray, c_G: np.ndarray, lo_G: np.ndarray, hi_G: np.ndarray,
              need: int) -> tuple[float, list[np.ndarray] | None]:
    """Cost of a feasible plan: prompts at lo_b / hi_b, at most one interior prompt per critical bin.

    The critical bins (hi_b > lo_b) absorb need - sum_b c_b lo_b in turn; each order that puts
    one critical bin last is tried and the cheapest kept. (inf, None) when lo/hi cannot reach
    ``need`` (possible only through rounding at ties); the DP then runs unpruned.
    """
    width_G = hi_G - lo_G
    rest = need - int(c_G @ lo_G)
    critical = [int(g) for g in np.flatnonzero(width_G > 0)]
    if not 0 <= rest <= int(c_G @ width_G):
        return np.inf, None
    best: tuple[float, dict[int, int]] = (np.inf, {})
    for last in critical or [-1]:
        left, takes, cost = rest, {}, 0.0
        for g in [h for h in critical if h != last] + ([last] if last >= 0 else []):
            takes[g] = min(left, int(c_G[g] * width_G[g]))
            left -= takes[g]
            if takes[g] % width_G[g]:
                cost += float(r_GA[g, lo_G[g] + takes[g] % width_G[g]])
        if left == 0 and cost < best[0]:
            best = (cost, takes)
    plan = []
    for g, (c, lo, width) in enumerate(zip(c_G, lo_G, width_G)):
        multiset = np.full(c, lo, np.int64)
        if g in best[1]:
            y, rem = divmod(best[1][g], int(width))
            multiset[c - y:] = lo + width
            multiset[0] += rem
        plan.append(np.sort(multiset))
    return best[0], plan


def _free_tables(r_GA: np.ndarray, max_free: int, bound: float) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """tables[k][g, s] = min cost of k prompts of bin g with arm sum s; choices[k] = arm of the k-th."""
    num_bins, num_arms = r_GA.shape
    tables = [np.zeros((num_bins, 1))]
    choices: list[np.ndarray] = [np.zeros((num_bins, 1), np.int64)]
    reversed_r = r_GA[:, ::-1]
    for _ in range(max_free):
        prev = tables[-1]
        padded = np.full((num_bins, prev.shape[1] + 2 * (num_arms - 1)), np.inf)
        padded[:, num_arms - 1: num_arms - 1 + prev.shape[1]] = prev
        size = prev.shape[1] + num_arms - 1
        # window[g, s, j] = prev[g, s - (A-1) + j] (arm a = A-1-j)
        window = as_strided(padded, (num_bins, size, num_arms), (padded.strides[0], padded.strides[1],
                                                                 padded.strides[1]))
        cand = window + reversed_r[:, None, :]
        pick = cand.argmin(axis=2)
        best = np.take_along_axis(cand, pick[..., None], axis=2)[..., 0]
        best[best > bound] = np.inf
        tables.append(best)
        choices.append(num_arms - 1 - pick)
    return tables, choices


def _bin_cost(table: np.ndarray, c: int, free: int, lo: int, width: int, limit: int
              ) -> tuple[int, np.ndarray, np.ndarray]:
    """R_b(t) over t = start..: min over y of table[t - (c - free) lo - y width]; also the argmin s."""
    base = (c - free) * lo
    span = table.size + (c - free) * width  # t - base in [0, span)
    span = max(min(span, limit - base + 1), 0)
    if width == 0 or c == free:
        cost = table[:span]
        return base, cost, np.arange(cost.size)
    t = np.arange(span)[:, None]
    s = np.arange(table.size)[None, :]
    y, remainder = np.divmod(t - s, width)
    valid = (remainder == 0) & (y >= 0) & (y <= c - free)
    cand = np.where(valid, table[None, :], np.inf)
    pick = cand.argmin(axis=1)
    return base, cand[np.arange(span), pick], pick


def _combine(tables: list[np.ndarray], choices: list[np.ndarray], c_G: np.ndarray,
             lo_G: np.ndarray, hi_G: np.ndarray, free_G: np.ndarray, need: int, bound: float,
             heuristic: list[np.ndarray] | None) -> list[np.ndarray]:
    """Min-plus DP across bins over the total (narrow bins first), then backtrack each bin's multiset."""
    num_bins = c_G.size
    per_bin = []
    for g in range(num_bins):
        base, cost, pick = _bin_cost(tables[free_G[g]][g], int(c_G[g]), int(free_G[g]), int(lo_G[g]),
                                     int(hi_G[g] - lo_G[g]), need)
        finite = np.flatnonzero(cost <= bound)
        if finite.size == 0:
            if heuristic is not None:  # only by rounding at the bound: the heuristic plan is optimal
                return heuristic
            raise ValueError("exact_plan: no feasible plan (total unreachable)")
        first, last = int(finite[0]), int(finite[-1])
        per_bin.append((base + first, cost[first: last + 1], pick[first: last + 1]))
    order = sorted(range(num_bins), key=lambda g: per_bin[g][1].size)
    low_suffix = np.concatenate([np.cumsum([per_bin[g][0] for g in order[::-1]])[::-1], [0]])
    high_suffix = np.concatenate([np.cumsum([per_bin[g][0] + per_bin[g][1].size - 1
                                             for g in order[::-1]])[::-1], [0]])
    best = np.full(need + 1, np.inf)
    best[0] = 0.0
    steps = []
    for rank, g in enumerate(order):
        start, cost, _ = per_bin[g]
        width = cost.size
        lo_tau = max(need - int(high_suffix[rank + 1]), 0)
        hi_tau = min(need - int(low_suffix[rank + 1]), need)
        padded = np.concatenate([np.full(width - 1 + max(start, 0), np.inf), best])
        # new[tau] = min_k best[tau - start - k] + cost[k]
        window = as_strided(padded[lo_tau:], (hi_tau - lo_tau + 1, width), padded.strides * 2)[:, ::-1]
        cand = window + cost[None, :]
        pick = cand.argmin(axis=1)
        new = np.full(need + 1, np.inf)
        new[lo_tau: hi_tau + 1] = cand[np.arange(pick.size), pick]
        new[new > bound] = np.inf
        arg = np.full(need + 1, -1, np.int64)
        arg[lo_tau: hi_tau + 1] = pick
        steps.append(arg)
        best = new
    if not np.isfinite(best[need]):
        if heuristic is not None:
            return heuristic
        raise ValueError("exact_plan: no feasible plan (total unreachable)")
    result: list[np.ndarray] = [np.zeros(0, np.int64)] * num_bins
    tau = need
    for rank in range(num_bins - 1, -1, -1):
        g = order[rank]
        start, _, pick = per_bin[g]
        k = int(steps[rank][tau])
        t = start + k
        tau -= t
        result[g] = _multiset(choices, g, int(free_G[g]), int(pick[k]), t, int(c_G[g]), int(lo_G[g]),
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
