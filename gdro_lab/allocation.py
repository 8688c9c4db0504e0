"""Rollout allocation math: the square-root (Neyman) law and exact-budget integer plans.

Paper: Thm 4.2 (Eq. 28-31). Minimise the variance proxy sum_b q_b v_b / n_b subject to
sum_b q_b n_b = n_bar. Unconstrained solution n_b* = n_bar sqrt(v_b) / sum_j q_j sqrt(v_j);
with the arm box n_min <= n_b <= n_max the KKT solution is n_b(mu) = clip(sqrt(v_b / mu)),
with the shadow price mu chosen so that the budget holds. Both are implemented here, plus
the integer plans used to execute an allocation with an exact total (sum_i n_i = P n_bar).
All functions are pure; shapes: ``G`` bins, ``P`` prompts, ``A`` arms.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from gdro_lab._validate import ConfigError
from gdro_lab.checks import as_float_array, as_int, as_int_array, check_bins, check_log_prob, check_total


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

    KKT: n_b = clip(sqrt(v_b / mu), n_min, n_max). Writing s = 1 / sqrt(mu), the budget
    f(s) = sum_b q_b clip(sqrt(v_b) s, n_min, n_max) / sum_b q_b is piecewise linear and
    non-decreasing in s with breakpoints n_min / sqrt(v_b) and n_max / sqrt(v_b), so the s
    with f(s) = n_bar is found exactly: by linear interpolation between the finite breakpoints,
    or, past the last one (n_max = inf: unboxed or half-boxed), on the final linear piece.
    With n_min = 0 and n_max = inf this is exactly the unclipped law. Needs
    0 <= n_min <= n_bar <= n_max (n_max may be inf). Bins with v_b = 0 (any n is optimal for
    them) share what the others leave of the budget, which is n_min unless every other bin is
    at n_max.
    """
    owner = "sqrt_allocation"
    v_G, q_G = _check_law_inputs(owner, variance_G, share_G)
    check_box(owner, n_bar, n_min, n_max)
    return sqrt_law(v_G, q_G, n_bar, n_min, n_max)


def sqrt_law(v_G: np.ndarray, q_G: np.ndarray, n_bar: float, n_min: float, n_max: float) -> np.ndarray:
    """:func:`sqrt_allocation` on checked float arrays (unchecked; the step record's SE optimum calls this)."""
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


def sqrt_law_list(v_G: list[float], q_G: list[float], n_bar: float, n_min: float, n_max: float) -> list[float]:
    """:func:`sqrt_law` on short lists of floats, in plain Python (the step record's per-step SE optimum,
    G ~ 10 bins, where numpy's per-call cost exceeds the arithmetic).

    The same piecewise-linear budget f(s) = sum_b q_b clip(sqrt(v_b) s, n_min, n_max) / sum_b q_b, walked
    through its knots in increasing order (a bin enters the linear part at n_min / sqrt(v_b) and leaves it
    at n_max / sqrt(v_b)) until it passes n_bar, then interpolated on that piece as np.interp does; equal
    to :func:`sqrt_law` up to rounding (tests/test_allocation.py)."""
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


def tie_broken(log_prob_GA: np.ndarray, n_min: int, tie_center: float | None) -> tuple[np.ndarray, np.ndarray]:
    """(log-probs with a 1e-9 (n - tie_center)^2 penalty, arm values): ties resolve toward tie_center."""
    log_prob = np.asarray(log_prob_GA, float)
    arms = n_min + np.arange(log_prob.shape[1])
    if tie_center is not None:
        log_prob = log_prob - 1e-9 * (arms[None, :] - tie_center) ** 2
    return log_prob, arms


def exact_budget_plan(log_prob_GA: np.ndarray, count_G: np.ndarray, total: int,
                      n_min: int, tie_center: float | None = None, *,
                      weight: str = "bin") -> tuple[np.ndarray, bool]:
    """The paper's DP (§3.3): one arm per bin under the exact sum sum_b c_b n_b = total.

    Two objectives, named by how a bin is weighted:
    - ``weight="count"``: sum_b c_b log p_b(n_b), the paper's "joint probability" of the plan
      (every prompt of bin b draws n_b from p_b);
    - ``weight="bin"`` (default, backward compatible): sum_b log p_b(n_b), the released code's
      ``rollout_choose_arms`` objective, which counts a bin of 1 prompt like a bin of 100.
    ``log_prob_GA[b, a]`` is log p_b(n_min + a); ``count_G`` the prompts per bin (bins with 0
    prompts are ignored). Returns (arm value n_G, exact). When no one-arm-per-bin plan hits
    ``total`` (possible for unlucky counts), the plan with the reachable sum closest to
    ``total`` is returned with exact=False and the caller finishes it with
    :func:`adjust_to_total` on single prompts. ``tie_center`` adds a 1e-9 (n - tie_center)^2
    penalty so that equally likely plans resolve toward that value instead of arbitrarily.
    Cost O(G * A * total), vectorised over partial sums.
    """
    if weight not in ("count", "bin"):
        raise ConfigError(f"exact_budget_plan: weight={weight!r} is invalid: must be 'count' or 'bin'")
    log_prob, arms = tie_broken(check_log_prob("exact_budget_plan", log_prob_GA), n_min, tie_center)
    counts = as_int_array("exact_budget_plan", "count_G", count_G, ndim=1, low=0)
    if counts.shape != (log_prob.shape[0],):
        raise ConfigError(f"exact_budget_plan: count_G has {counts.size} bins: must match log_prob_GA "
                          f"({log_prob.shape[0]})")
    total = as_int("exact_budget_plan", "total", total, low=0)
    if weight == "count":
        log_prob = log_prob * counts[:, None]
    num_bins, num_arms = log_prob.shape
    n_G = np.full(num_bins, int(round(tie_center)) if tie_center is not None else n_min, dtype=np.int64)
    active = np.flatnonzero(counts > 0)
    if active.size == 0:
        return n_G, total == 0
    cap = int(max(total, counts[active].sum() * n_min) + counts[active].max() * (num_arms - 1)) + 1
    best = np.full(cap, -np.inf)
    best[0] = 0.0
    choice = np.zeros((active.size, cap), dtype=np.int16)
    for row, b in enumerate(active):
        new = np.full(cap, -np.inf)
        for a in range(num_arms):
            shift = int(counts[b] * arms[a])
            if shift >= cap:
                break
            cand = best[: cap - shift] + log_prob[b, a]
            better = cand > new[shift:]
            new[shift:][better] = cand[better]
            choice[row, shift:][better] = a
        best = new
    reachable = np.flatnonzero(np.isfinite(best))
    exact = bool(total < cap and np.isfinite(best[total]))
    end = total if exact else int(reachable[np.argmin(np.abs(reachable - total))])
    for row in range(active.size - 1, -1, -1):
        b = active[row]
        a = int(choice[row, end])
        n_G[b] = arms[a]
        end -= int(counts[b] * arms[a])
    return n_G, exact


def forbidden_floor(values_GA: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(values with -inf replaced by a finite floor far below every finite value, mask of -inf).

    The floor is min_finite - (size + 1)(range + 1): one such arm costs more than any plan of
    ``size`` prompts over finite arms can gain, so an optimum over the floored values uses
    none unless it must.
    Rows with no finite value are a ValueError.
    """
    values = np.asarray(values_GA, float)
    forbidden = np.isneginf(values)
    if forbidden.all(axis=1).any():
        raise ValueError("log_prob_GA: a bin with prompts has probability 0 on every arm")
    finite = values[~forbidden]
    floor = float(finite.min()) - (size + 1.0) * (float(np.ptp(finite)) + 1.0) if finite.size else 0.0
    return np.where(forbidden, floor, values), forbidden


def concave_envelope(values_GA: np.ndarray) -> np.ndarray:
    """Upper concave envelope of each row over the integer points 0..A-1, shape (G, A).

    Rows that are already concave (second differences <= 1e-12, the usual case under full
    feedback, where logits are minus a sum of convex costs) are returned as they are; the others
    get the upper hull by Andrew's monotone chain. -inf entries lie below every hull; outside
    the finite points the envelope is -inf.
    """
    values = np.asarray(values_GA, float)
    out = values.copy()
    with np.errstate(invalid="ignore"):
        second = values[:, 2:] - 2.0 * values[:, 1:-1] + values[:, :-2]
    bent = ~np.all(second <= 1e-12, axis=1)  # NaN (from -inf) counts as bent
    for row in np.flatnonzero(bent):
        out[row] = _upper_hull(values[row])
    return out


def _upper_hull(values_A: np.ndarray) -> np.ndarray:
    """Upper concave hull of one row, evaluated at every integer point."""
    xs = np.flatnonzero(np.isfinite(values_A))
    out = np.full(values_A.size, -np.inf)
    if xs.size == 0:
        return out
    hull: list[int] = []
    for x in xs.tolist():
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            # drop b when it lies on or below the chord from a to x
            if (values_A[b] - values_A[a]) * (x - a) <= (values_A[x] - values_A[a]) * (b - a):
                hull.pop()
            else:
                break
        hull.append(x)
    points = np.arange(hull[0], hull[-1] + 1)
    out[points] = np.interp(points, hull, values_A[hull])
    return out


def concave_budget_plan(log_prob_GA: np.ndarray, bins_P: np.ndarray, total: int, n_min: int,
                        tie_center: float | None = None) -> np.ndarray:
    """Exact-budget plan maximising the joint per-prompt probability, on the concave envelope.

    Exact only when every log p_b is concave in n; :func:`gdro_lab.planner.exact_plan` is exact
    for any distributions and is what Rollout-GDRO executes. Kept as the envelope relaxation.

    Maximises sum_i env_{b(i)}(n_i) subject to sum_i n_i = total, n_i in arms, where env_b is
    the upper concave envelope of log p_b (= log p_b for log-concave p_b). The problem is a
    separable concave resource allocation, so the greedy on marginal gains is exact (the DP's
    closed form): start every prompt at n_min and grant the (total - P n_min) increments with
    the largest gains env_b(a + 1) - env_b(a). Within a bin prompts end at two adjacent arms.
    All prompts must be assigned (bins_P >= 0). ``tie_center`` as in exact_budget_plan.
    """
    log_prob, arms = tie_broken(check_log_prob("concave_budget_plan", log_prob_GA), n_min, tie_center)
    num_bins, num_arms = log_prob.shape
    bins = check_bins("concave_budget_plan", "bins_P", bins_P, num_bins, allow_unassigned=False)
    counts = np.bincount(bins, minlength=num_bins)
    total = check_total("concave_budget_plan", total, bins.size, n_min, n_min + num_arms - 1)
    needed = int(total - bins.size * n_min)
    gains = np.diff(concave_envelope(log_prob), axis=1)  # (G, A-1), non-increasing along arms
    seg_bin = np.repeat(np.arange(num_bins), num_arms - 1)
    seg_arm = np.tile(np.arange(num_arms - 1), num_bins)
    seg_gain = gains.ravel()
    order = np.lexsort((seg_arm, -seg_gain))
    mult = counts[seg_bin[order]]
    taken = np.minimum(mult, np.maximum(needed - (np.cumsum(mult) - mult), 0))
    increments_G = np.bincount(seg_bin[order], weights=taken, minlength=num_bins).astype(np.int64)
    base_G = np.where(counts > 0, increments_G // np.maximum(counts, 1), 0)
    extra_G = increments_G - base_G * counts
    rank_P = _rank_within_bin(bins, num_bins)
    return n_min + base_G[bins] + (rank_P < extra_G[bins])


def _rank_within_bin(bins_P: np.ndarray, num_bins: int) -> np.ndarray:
    """Position of each prompt among the prompts of its bin, in batch order."""
    order = np.argsort(bins_P, kind="stable")
    counts = np.bincount(bins_P, minlength=num_bins)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.empty_like(bins_P)
    rank[order] = np.arange(bins_P.size) - np.repeat(starts, counts)
    return rank
