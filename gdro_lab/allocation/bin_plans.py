"""Integer plans over per-bin arm distributions with an exact budget (§3.3).

From ``log_prob_GA[b, a]`` = log p_b(n_min + a): :func:`exact_budget_plan` (the paper's DP, one arm per
bin, on the paper's or the released code's objective) and :func:`concave_budget_plan` (the envelope
greedy, exact for log-concave distributions), plus helpers shared with the exact planner. All pure;
shapes: ``G`` bins, ``P`` prompts, ``A`` arms. Detail: docs/core-allocation-notes.md#gdro_lab-allocation-bin_plans.
"""

from __future__ import annotations

import numpy as np

from gdro_lab._validate import ConfigError
from gdro_lab.checks import as_int, as_int_array, check_bins, check_log_prob, check_total


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

    ``weight="count"``: sum_b c_b log p_b(n_b), the paper's "joint probability" of the plan;
    ``weight="bin"`` (default): sum_b log p_b(n_b), the released code's ``rollout_choose_arms`` objective.
    ``log_prob_GA[b, a]`` is log p_b(n_min + a); ``count_G`` the prompts per bin. Returns (arm value n_G,
    exact): exact=False with the closest reachable sum when no plan hits ``total``. ``tie_center`` adds
    1e-9 (n - tie_center)^2. Cost O(G * A * total). Detail: docs/core-allocation-notes.md#gdro_lab-allocation-bin_plans.
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

    The floor min_finite - (size + 1)(range + 1) is never used by an optimum over ``size`` prompts unless it
    must be. Rows with no finite value are a ValueError.
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

    Concave rows come back as they are; -inf entries lie below every hull, and outside the finite points
    the envelope is -inf (Andrew's monotone chain: docs/core-allocation-notes.md#gdro_lab-allocation-bin_plans).
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

    Maximises sum_i env_{b(i)}(n_i) subject to sum_i n_i = total, n_i in arms, where env_b is the
    upper concave envelope of log p_b, by the greedy on marginal gains; so exact only when every log p_b
    is concave in n. Within a bin prompts end at two adjacent arms. All prompts must be assigned
    (bins_P >= 0). ``tie_center`` as in exact_budget_plan. Detail: docs/core-allocation-notes.md#gdro_lab-allocation-bin_plans.
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
