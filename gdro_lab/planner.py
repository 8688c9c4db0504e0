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
2. A feasible plan has cost U >= the optimum's: prompts at lo_b, as many at hi_b as fit, and the
   remainder closed by the cheapest single move of one prompt (``_feasible``). U = 0 is optimal.
3. Bounded deviations (the two lemmas that make this exact). In an optimal plan, per bin:
   (a) WLOG at most L_b - 1 prompts sit strictly inside (lo_b, hi_b), L_b = hi_b - lo_b: among
   any L_b interior prompts, a subset of size q <= L_b has offset sum (from lo_b) = m L_b with
   0 < m < q (prefix sums mod L_b, pigeonhole), and it can be replaced by m prompts at hi_b and
   q - m at lo_b: same count, same total, reduced cost 0 <= theirs (r is 0 at lo_b and hi_b and
   >= 0 elsewhere). Each interior prompt also costs >= delta_in_b, so there are at most
   min(L_b - 1, floor(U / delta_in_b)) of them;
   (b) every prompt outside [lo_b, hi_b] costs at least delta_out_b = min_{a outside} r_b(a) > 0,
   so there are at most floor(U / delta_out_b) of them.
   Hence K_b "free" prompts (that bound, at most c_b) plus c_b - K_b prompts at lo_b or hi_b
   cover an optimal plan.
4. Per bin, D_b[s] = min cost of K_b free prompts with arm sum s (a small DP over k <= K_b),
   R_b(t) = min_y D_b[t - (c_b - K_b) lo_b - y L_b] over y in [0, c_b - K_b]; then a min-plus DP
   across bins over the total (only totals with R_b(t) <= U and able to reach ``need``).
5. Iterative deepening: when U is loose, the DP first runs with at most 2 free prompts per bin;
   its optimum is feasible, so its cost is a tighter U, which certifies optimality when the
   K_b it implies are within those used, and otherwise sets the K_b of a second (final) round.

When every bin's values are concave in n (full feedback: the logits are minus a sum of convex
costs), the greedy on marginal gains is exact and is used directly (``concave_budget_plan``).
Everything is vectorised with numpy. Measured at the paper's scale (256 prompts, 10 bins, 11 arms;
docs/benchmarks.md): full feedback costs what the greedy costs; bandit feedback, whose spiky
distributions need the DP, costs about three to four times as much. Tested against brute force
and scipy.optimize.milp, paper scale included (tests/test_planner_exact.py).

Departs from the paper: the paper's DP chooses one arm per bin (``allocation.exact_budget_plan``,
offered with both objectives); this planner maximises the joint probability over prompts.
"""

from __future__ import annotations

import functools

import numpy as np
from numpy.lib.stride_tricks import as_strided

from gdro_lab.allocation import concave_budget_plan, forbidden_floor, tie_broken
from gdro_lab.checks import check_bins, check_log_prob, check_total


def exact_plan(log_prob_GA: np.ndarray, bins_P: np.ndarray, total: int, n_min: int, *,
               tie_center: float | None = None) -> np.ndarray:
    """Exact argmax of sum_i log p_b(i)(n_i) s.t. sum_i n_i = total, n_i in n_min..n_min+A-1.

    ``log_prob_GA[b, a]`` = log p_b(n_min + a), finite or -inf (-inf arms are never used; a
    ValueError if the total cannot be met without them); ``bins_P`` in [0, G) for every prompt.
    ``tie_center`` adds 1e-9 (n - tie_center)^2 to the cost so that equally likely plans resolve
    toward that value. Returns n_P (int64). Within a bin prompts are interchangeable; earlier
    prompts in the batch get the larger arms (as concave_budget_plan). When every bin's values are
    concave in n (full feedback), the greedy on marginal gains is exact and is used directly.
    """
    values, arms = tie_broken(check_log_prob("exact_plan", log_prob_GA), n_min, tie_center)
    num_bins, num_arms = values.shape
    bins = check_bins("exact_plan", "bins_P", bins_P, num_bins, allow_unassigned=False)
    size = bins.size
    check_total("exact_plan", total, size, n_min, n_min + num_arms - 1)
    if size == 0:
        return np.zeros(0, np.int64)
    need = int(total) - size * n_min
    if num_arms > 2 and np.isfinite(values).all():
        second = values[:, 2:] - 2.0 * values[:, 1:-1] + values[:, :-2]
        if np.all(second <= 0.0):  # log-concave rows: the greedy is the exact separable optimum
            return concave_budget_plan(log_prob_GA, bins, total, n_min, tie_center=tie_center)
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
        n_P[members] = arms_G[g][::-1]
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
    if heuristic is not None and bound == 0.0:
        return heuristic  # reduced cost 0 is the lower bound: optimal
    slack = tol * (c_G.sum() + 1)
    quick = _relaxed(r_GA, c_G, lo_G, hi_G, need, bound, slack, zero.sum() == num_bins + np.sum(hi_G > lo_G))
    if quick is not None:
        return heuristic if quick is True else quick
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
            return _backtrack(per_bin, order, steps, choices, c_G, lo_G, hi_G, free_G, need)
        free_G = np.maximum(free_G, needed_G)
        bound = min(bound, cost)


def _relaxed(r_GA: np.ndarray, c_G: np.ndarray, lo_G: np.ndarray, hi_G: np.ndarray, need: int,
             bound: float, slack: float, simple: bool, rounds: int = 12) -> bool | list[np.ndarray] | None:
    """Lower bound by forgetting which bin pays (step 2b): True if it certifies the feasible plan,
    the optimal multisets if the relaxed optimum fits the bins' counts, else None.

    Every prompt off its zero-cost arms costs r_b(a) and shifts the total by a - lo_b; the relaxation
    takes m(d) = min_b r_b(lo_b + d) for any number of prompts, so a shortest path over the shift
    (Bellman-Ford, one costly prompt per round) to D - h L (h prompts at hi of the critical bin)
    costs at most the optimum. Needs zero costs only at lo_b, hi_b and at most one critical bin.
    """
    num_bins, num_arms = r_GA.shape
    critical = np.flatnonzero(hi_G > lo_G)
    if not simple or critical.size > 1:
        return None
    width = int(hi_G[critical[0]] - lo_G[critical[0]]) if critical.size else 0
    high_max = int(c_G[critical[0]]) if critical.size else 0
    targets = need - int(c_G @ lo_G) - width * np.arange(high_max + 1)
    shift = np.arange(-(num_arms - 1), num_arms)
    arm = lo_G[:, None] + shift[None, :]
    valid = (arm >= 0) & (arm < num_arms)
    cost = np.where(valid, r_GA[np.arange(num_bins)[:, None], np.clip(arm, 0, num_arms - 1)], np.inf)
    cost[cost <= 0.0] = np.inf  # zero-cost arms are the h prompts at hi (or at lo: no shift)
    payer = cost.argmin(axis=0)
    m = cost[payer, np.arange(shift.size)]
    low = min(0, int(targets.min())) - (num_arms - 1)
    size = max(0, int(targets.max())) + num_arms - low
    dist = np.full(size + 2 * (num_arms - 1), np.inf)
    core = dist[num_arms - 1: num_arms - 1 + size]  # core[s - low] = min cost of shift s
    core[-low] = 0.0
    window = as_strided(dist, (size, shift.size), dist.strides * 2)  # window[s, j]: shift A-1-j
    reversed_m, cheapest = m[::-1], float(m.min())
    layers = [core.copy()]
    for k in range(1, rounds + 1):  # layers[k][s - low]: min cost of shift s with <= k costly prompts
        core[:] = np.minimum((window + reversed_m).min(axis=1), core)
        layers.append(core.copy())
        best = float(core[targets - low].min())
        if best <= (k + 1) * cheapest:
            break  # any plan with more costly prompts costs more: best is the relaxed optimum
    else:
        return True if min(best, (rounds + 1) * cheapest) >= bound - slack else None
    if best >= bound - slack:
        return True if np.isfinite(bound) else None
    pick = int(core[targets - low].argmin())
    high = np.zeros(num_bins, np.int64)
    high[critical] = pick
    arms = [np.repeat([lo, hi], [c - h, h]) for lo, hi, c, h in zip(lo_G, hi_G, c_G, high)]
    s = int(targets[pick]) - low
    for k in range(len(layers) - 1, 0, -1):
        if layers[k][s] == layers[k - 1][s]:
            continue
        dist[num_arms - 1: num_arms - 1 + size] = layers[k - 1]
        d = num_arms - 1 - int((window[s] + reversed_m).argmin())
        g = int(payer[d + num_arms - 1])
        spot = np.flatnonzero(arms[g] == lo_G[g])
        if spot.size == 0:
            return None  # the relaxed optimum uses more prompts of bin g than it has
        arms[g][spot[0]] += d
        s -= d
    return [np.sort(a) for a in arms]


def _free_needed(bound: float, c_G: np.ndarray, interior_G: np.ndarray, delta_in_G: np.ndarray,
                 delta_out_G: np.ndarray) -> np.ndarray:
    """Free prompts per bin that certify optimality for plans of cost <= bound (lemmas (a), (b))."""
    with np.errstate(divide="ignore", invalid="ignore"):
        by_cost_in = np.where(delta_in_G > 0, np.floor(bound / delta_in_G), np.inf)
        by_cost_out = np.where(np.isfinite(delta_out_G), np.floor(bound / delta_out_G), 0.0)
    interior = np.minimum(interior_G, by_cost_in)
    return np.minimum(c_G, interior + np.minimum(by_cost_out, c_G)).astype(np.int64)


@functools.lru_cache(maxsize=16)
def _chord_weights(num_arms: int) -> tuple[np.ndarray, np.ndarray]:
    """For pairs i < j and points i <= a <= j: (weight (a - i) / (j - i), 0 / -inf mask), shape (A*A, A)."""
    idx = np.arange(num_arms, dtype=float)
    i, j, a = idx[:, None, None], idx[None, :, None], idx[None, None, :]
    valid = (i <= a) & (a <= j) & (j > i)
    weight = np.where(valid, (a - i) / np.where(j > i, j - i, 1.0), 0.0)
    return weight.reshape(-1, num_arms), np.where(valid, 0.0, -np.inf).reshape(-1, num_arms)


def _envelope(f_GA: np.ndarray) -> np.ndarray:
    """Upper concave envelope of finite rows: max over chords (i <= a <= j), vectorised, O(G A^3)."""
    num_bins, num_arms = f_GA.shape
    weight, mask = _chord_weights(num_arms)
    fi = np.repeat(f_GA, num_arms, axis=1)[:, :, None]  # f[i] for pair (i, j) = row i * A + j
    fj = np.tile(f_GA, (1, num_arms))[:, :, None]
    chords = fi + (fj - fi) * weight[None] + mask[None]
    return np.maximum(chords.max(axis=1), f_GA)


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
    """Cost and arm multisets of a good feasible plan (its cost bounds the optimum's, step 2).

    Prompts sit at lo_b; the critical bins (hi_b > lo_b) take as many prompts at hi_b as fit.
    The remainder d is closed by the cheapest single move: one prompt from lo_b or hi_b to that
    + d in any bin, or one more prompt at hi in a critical bin and one prompt moved down by the
    overshoot in another bin. (inf, None) when no such plan exists; the DP then runs unpruned.
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
    hi_count = y_G + (np.arange(num_bins) == best[4])
    plan = [np.repeat([lo, hi], [c - h, h]).astype(np.int64) for lo, hi, c, h in zip(lo_G, hi_G, c_G, hi_count)]
    if left:
        moved = plan[best[1]]
        moved[int(np.flatnonzero(moved == best[2])[0])] += best[3]
        moved.sort()
    return (best[0] if left else 0.0), plan


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
