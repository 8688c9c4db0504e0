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
2. Relaxation (``_relaxed``, what almost every step needs). Relative to every prompt at lo_b, a
   prompt at a costly arm a shifts the total by d = a - lo_b at cost r_b(a); prompts at hi_b of
   the (usually one) critical bin shift it by L = hi_b - lo_b for free. Forgetting which bin pays,
   a shift d costs m(d) = min_b r_b(lo_b + d), any number of times: the cheapest multiset of shifts
   reaching D - h L (D = need - sum_b c_b lo_b, 0 <= h <= c_crit) is a shortest path over the
   partial sum (Bellman-Ford, one costly prompt per round; any multiset can be ordered so that its
   partial sums stay within A - 1 of [min(0, t), max(0, t)]; stop when k + 1 times the cheapest
   m exceeds the best found, or at a fixed point; 12 rounds). It costs at most the optimum, so
   when its multiset fits the bins' counts it is the optimum (measured: about 98% of bandit steps
   at the paper's scale); else it is a lower bound (at least 13 times the cheapest m when the
   rounds ran out). A feasible plan has cost U >= the optimum's: prompts at lo_b, as many at hi_b
   as fit, and the remainder closed by the cheapest single move of one prompt (``_feasible``); U
   equal to the lower bound is optimal. When the rounds ran out (a near-tied arm) and fewer than
   64 costly prompts can beat U, the relaxation runs again with that many rounds.
3. Otherwise (rare, measured: about 2% of bandit steps): an exact bounded-deviation min-plus DP
   across bins, pruned by U (``gdro_lab.planner_dp``, whose docstring gives the two lemmas).

When every bin's values are concave in n (full feedback: the logits are minus a sum of convex
costs), the greedy on marginal gains is exact and is used directly (``concave_budget_plan``).
Everything is vectorised with numpy. Measured at the paper's scale (256 prompts, 10 bins, 11 arms;
docs/benchmarks.md): full feedback costs what the greedy costs (about 0.15 ms); bandit feedback
about 0.3-0.5 ms median (the relaxation), a few ms in the rare steps that need the DP or a long
shortest path. Tested against brute force and scipy.optimize.milp, paper scale and real bandit
runs included (tests/test_planner_exact.py).

Departs from the paper: the paper's DP chooses one arm per bin (``allocation.exact_budget_plan``,
offered with both objectives); this planner maximises the joint probability over prompts.
"""

from __future__ import annotations

import functools

import numpy as np

from gdro_lab.allocation import concave_budget_plan, forbidden_floor, tie_broken
from gdro_lab.checks import check_bins, check_log_prob, check_total
from gdro_lab.planner_dp import deviation_dp


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
    return plan_values(values, bins, int(total), n_min)


def plan_values(values: np.ndarray, bins: np.ndarray, total: int, n_min: int) -> np.ndarray:
    """:func:`exact_plan` on checked inputs: tie-broken values (G, A), bins in [0, G), at least one
    prompt, a total within [P n_min, P (n_min + A - 1)] (unchecked; Rollout-GDRO's plan calls this)."""
    num_bins, num_arms = values.shape
    size = bins.size
    need = total - size * n_min
    all_finite = bool(np.isfinite(values).all())
    counts_all = np.bincount(bins, minlength=num_bins)
    if num_arms > 2 and all_finite:
        second = values[:, 2:] - 2.0 * values[:, 1:-1] + values[:, :-2]
        if np.all(second <= 0.0):  # log-concave rows: the greedy is the exact separable optimum
            return n_min + _concave_greedy(values, bins, counts_all, need)
    every_bin = bool(counts_all.all())
    present = _arange(num_bins) if every_bin else np.flatnonzero(counts_all)
    if all_finite:
        scale, forbidden = float(np.abs(values).max()), None
        f_GA = values if every_bin else values[present]
    else:
        finite = values[np.isfinite(values)]
        scale = float(np.abs(finite).max()) if finite.size else 0.0
        f_GA, forbidden = forbidden_floor(values[present], size)
    # x_GA[g, a]: prompts of present bin g at arm a; earlier prompts of a bin get the larger arms
    x_GA = _solve(f_GA, counts_all if every_bin else counts_all[present], need, scale)
    n_P = np.empty(size, np.int64)
    n_P[np.argsort(bins, kind="stable")] = np.repeat(_descending_arms(num_arms, present.size),
                                                     x_GA[:, ::-1].ravel())
    used = forbidden & (x_GA > 0) if forbidden is not None else None
    if used is not None and used.any():
        raise ValueError(f"exact_plan: no plan with total {total} avoids arms of probability 0 "
                         f"(bin {present[used.any(axis=1).argmax()]}); allow more arms or change the total")
    return n_min + n_P


@functools.lru_cache(maxsize=64)
def _descending_arms(num_arms: int, num_bins: int) -> np.ndarray:
    """tile(arange(A)[::-1], G): arm of each (bin, arm) slot, arms descending within a bin."""
    return np.tile(np.arange(num_arms)[::-1], num_bins)


@functools.lru_cache(maxsize=16)
def _segments(num_bins: int, num_arms: int) -> tuple[np.ndarray, np.ndarray]:
    """(bin, arm) of each increment a -> a + 1, flattened bin-major: shapes (G (A - 1),)."""
    return np.repeat(np.arange(num_bins), num_arms - 1), np.tile(np.arange(num_arms - 1), num_bins)


def _concave_greedy(values: np.ndarray, bins: np.ndarray, counts: np.ndarray, need: int) -> np.ndarray:
    """Arm offsets a_i of allocation.concave_budget_plan on rows already concave (same result, unchecked).

    Grants the ``need`` increments with the largest gains values[b, a + 1] - values[b, a] (ties: lower
    arm, then lower bin), each bin's increment taken by all its prompts; within a bin the first
    ``extra`` prompts in batch order go one arm higher.
    """
    num_bins, num_arms = values.shape
    seg_bin, seg_arm = _segments(num_bins, num_arms)
    gains = values[:, 1:] - values[:, :-1]
    order = np.lexsort((seg_arm, -gains.ravel()))
    # grant the increments in that order, each to every prompt of its bin, until `need` are granted
    # (a handful of segments: a plain loop beats the numpy calls of a cumulative sum)
    per_bin = counts.tolist()
    increments = [0] * num_bins
    left = need
    for b in seg_bin[order].tolist():
        if left <= 0:
            break
        taken = min(per_bin[b], left)
        increments[b] += taken
        left -= taken
    base = [inc // c if c else 0 for inc, c in zip(increments, per_bin)]
    offset = np.array(base)[bins]
    for b, (inc, c, low) in enumerate(zip(increments, per_bin, base)):
        if inc != low * c:  # the first (inc - low c) prompts of the bin, in batch order, go one arm higher
            offset[np.flatnonzero(bins == b)[:inc - low * c]] += 1
    return offset


def _solve(f_GA: np.ndarray, c_G: np.ndarray, need: int, scale: float) -> np.ndarray:
    """Prompts per bin and arm, x_GA, maximising sum f with sum of arms = need (finite f).

    The relaxation (step 2) first; then the feasible plan if it meets the relaxation's bound;
    else the bounded-deviation DP (step 3).
    """
    num_bins, num_arms = f_GA.shape
    if num_arms == 1:
        return c_G[:, None].copy()
    arm = _arange(num_arms)
    lam = _dual(f_GA, c_G, need)
    adjusted = f_GA - lam * arm
    r_GA = np.maximum(adjusted.max(axis=1, keepdims=True) - adjusted, 0.0)
    tol = 1e-12 * (1.0 + scale + abs(lam) * num_arms)
    zero = r_GA <= tol
    lo_G = zero.argmax(axis=1)
    hi_G = num_arms - 1 - zero[:, ::-1].argmax(axis=1)
    r_GA[zero] = 0.0
    slack = tol * (c_G.sum() + 1)
    simple = zero.sum() == num_bins + np.sum(hi_G > lo_G)
    lower, relaxed = _relaxed(r_GA, c_G, lo_G, hi_G, need, simple, 12)
    if relaxed is not None:
        return relaxed  # the relaxation's optimum fits the bins: optimal
    bound, heuristic = _feasible(r_GA, c_G, lo_G, hi_G, need)
    if heuristic is not None and bound > lower + slack and simple and (r_GA > 0).any():
        # a near-tied arm: with fewer than (bound - slack) / cheapest costly prompts, the
        # relaxation may still settle it in a few more rounds (cost ~ rounds^2: at most 64)
        rounds = int(np.ceil((bound - slack) / r_GA[r_GA > 0].min())) - 1
        if 12 < rounds <= 64:
            lower, relaxed = _relaxed(r_GA, c_G, lo_G, hi_G, need, simple, rounds)
            if relaxed is not None:
                return relaxed
    if heuristic is not None and bound <= lower + slack:
        return heuristic  # its cost meets a lower bound (0, or the relaxation's): optimal
    return deviation_dp(r_GA, c_G, lo_G, hi_G, need, bound, slack, heuristic)


def _relaxed(r_GA: np.ndarray, c_G: np.ndarray, lo_G: np.ndarray, hi_G: np.ndarray, need: int,
             simple: bool, rounds: int) -> tuple[float, np.ndarray | None]:
    """(Lower bound on the optimal cost, the optimal x_GA when the relaxation's optimum fits the bins).

    Step 2 of the module docstring. Every prompt off its zero-cost arms costs r_b(a) and shifts
    the total by a - lo_b; forgetting which bin pays, a shift d costs m(d) = min_b r_b(lo_b + d) for any number of prompts,
    so a shortest path over the shift (Bellman-Ford, one costly prompt per round) to D - h L
    (h prompts at hi of the critical bin, D = need - sum_b c_b lo_b) costs at most the optimum.
    Needs zero costs only at lo_b and hi_b, and at most one critical bin; else (0, None).
    """
    num_bins, num_arms = r_GA.shape
    critical = np.flatnonzero(hi_G > lo_G)
    if not simple or critical.size > 1:
        return 0.0, None
    padded = np.empty((num_bins, 3 * num_arms - 2))
    padded.fill(np.inf)
    padded[:, num_arms - 1: 2 * num_arms - 1] = np.where(r_GA > 0.0, r_GA, np.inf)  # zero: no move
    rows, shifts = _shift_layout(num_bins, num_arms)
    cost = padded.ravel().take((rows + lo_G)[:, None] + shifts)  # cost[g, d + A - 1]
    payer, m_D = cost.argmin(axis=0), cost.min(axis=0)
    width = int(hi_G[critical[0]] - lo_G[critical[0]]) if critical.size else 1
    targets = (need - int(c_G @ lo_G), width, int(c_G[critical].sum()))  # D - width h, h = 0..h_max
    lower, high, moves = _shortest_shift(m_D, targets, rounds)
    if moves is None:
        return lower, None
    high_G = np.zeros(num_bins, np.int64)
    if critical.size:
        high_G[critical[0]] = high
    x_GA = _two_arms(num_arms, c_G, lo_G, hi_G, high_G)
    for d in moves:
        g = int(payer[d + num_arms - 1])
        if x_GA[g, lo_G[g]] == 0:
            return lower, None  # the relaxed optimum uses more prompts of bin g than it has
        x_GA[g, lo_G[g]] -= 1
        x_GA[g, lo_G[g] + d] += 1
    return lower, x_GA


def _shortest_shift(m_D: np.ndarray, targets: tuple[int, int, int], rounds: int
                    ) -> tuple[float, int, list[int] | None]:
    """Cheapest multiset of shifts d (cost m_D[d + A - 1] each, any number) summing to a target
    t = start - width h, h in 0..h_max, with at most ``rounds`` shifts unless that is proven optimal:
    (cost, h, shifts); (a lower bound, 0, None) when a cheaper plan could use more shifts.

    States are partial sums, kept within [min(0, t) - A + 1, max(0, t) + A - 1] (any multiset can
    be ordered so) and within +-(A - 1) rounds; layer k holds the costs with at most k shifts.
    """
    start, width, h_max = targets
    arms = (m_D.size + 1) // 2
    cheapest = float(m_D.min())
    low = max(-(arms - 1) * rounds, min(0, start - width * h_max) - arms + 1)
    top = min((arms - 1) * rounds, max(0, start) + arms - 1)
    h_lo, h_hi = max(0, -((top - start) // width)), min(h_max, (start - low) // width)
    if h_lo > h_hi or top < 0 or low > 0:
        return (rounds + 1) * cheapest, 0, None
    stop = start - low - width * h_hi - 1
    span = slice(start - low - width * h_lo, stop if stop >= 0 else None, -width)
    size = top - low + 1
    dist = np.full(size + 2 * (arms - 1), np.inf)
    core = dist[arms - 1: arms - 1 + size]  # core[s - low]: min cost of shift s
    core[-low] = 0.0
    window = np.ndarray((size, m_D.size), float, dist, strides=dist.strides * 2)  # shift A-1-j
    reversed_m = m_D[::-1].copy()
    layers, best, k = [core.copy()], float(core[span].min()), 0
    while best > (k + 1) * cheapest:  # a plan with more than k shifts might be cheaper
        if k == rounds:
            return (rounds + 1) * cheapest, 0, None
        new = np.minimum((window + reversed_m).min(axis=1), core)
        k = k + 1 if (new < core).any() else rounds  # a fixed point (new <= core): more rounds change nothing
        core[:] = new
        layers.append(new)
        best = float(core[span].min())
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




@functools.lru_cache(maxsize=64)
def _shift_layout(num_bins: int, num_arms: int) -> tuple[np.ndarray, np.ndarray]:
    """(row offsets g (3A - 2), shifts 0..2A-2) into the padded (G, 3A - 2) cost table of ``_relaxed``."""
    rows = np.arange(num_bins) * (3 * num_arms - 2)
    shifts = np.arange(2 * num_arms - 1)
    rows.flags.writeable = shifts.flags.writeable = False
    return rows, shifts


@functools.lru_cache(maxsize=16)
def _arange(size: int) -> np.ndarray:
    out = np.arange(size)
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=64)
def _chord_layout(num_bins: int, num_arms: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Flat gather indices into a (G, A) array of every chord (i <= a <= j) of every point, their weights
    (a - i) / (j - i) (0 for i = j), and the start of each (bin, point) segment: for ``_envelope``."""
    pairs = [[(i, j) for i in range(a + 1) for j in range(a, num_arms)] for a in range(num_arms)]
    i = np.array([p[0] for row in pairs for p in row])
    j = np.array([p[1] for row in pairs for p in row])
    a = np.repeat(np.arange(num_arms), [len(row) for row in pairs])
    weight = np.where(j > i, (a - i) / np.maximum(j - i, 1), 0.0)
    offset = np.arange(num_bins)[:, None] * num_arms
    starts = np.concatenate([[0], np.cumsum([len(row) for row in pairs])[:-1]])
    out = ((offset + i).ravel(), (offset + j).ravel(), np.tile(weight, num_bins),
           (np.arange(num_bins)[:, None] * i.size + starts).ravel())
    for array in out:
        array.flags.writeable = False
    return out


def _envelope(f_GA: np.ndarray) -> np.ndarray:
    """Upper concave envelope of finite rows: max over chords (i <= a <= j), vectorised, O(G A^3).

    (Every chord is evaluated as f_i + (f_j - f_i) w, its maximum taken per point by reduceat.)
    """
    num_bins, num_arms = f_GA.shape
    flat_i, flat_j, weight, starts = _chord_layout(num_bins, num_arms)
    values = f_GA.ravel()
    fi = values.take(flat_i)
    return np.maximum.reduceat(fi + (values.take(flat_j) - fi) * weight, starts).reshape(num_bins, num_arms)


def _dual(f_GA: np.ndarray, c_G: np.ndarray, need: int) -> float:
    """LP dual lambda: the gain of the need-th largest concave-envelope increment (with multiplicity)."""
    envelope = _envelope(f_GA)
    gains = (envelope[:, 1:] - envelope[:, :-1]).ravel()
    mult = np.repeat(c_G, f_GA.shape[1] - 1)
    order = np.argsort(-gains, kind="stable")
    cumulative = np.cumsum(mult[order])
    index = int(np.searchsorted(cumulative, max(need, 1)))
    return float(gains[order[min(index, order.size - 1)]])


def _feasible(r_GA: np.ndarray, c_G: np.ndarray, lo_G: np.ndarray, hi_G: np.ndarray,
              need: int) -> tuple[float, np.ndarray | None]:
    """Cost and prompts per arm x_GA of a good feasible plan (its cost bounds the optimum's, step 2).

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
