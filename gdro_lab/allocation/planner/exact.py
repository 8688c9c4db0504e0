"""Exact per-prompt rollout planner for any arm distributions (§3.3, "joint probability").

With arms a = 0..A-1 standing for n = n_min + a and f_b(a) = log p_b(n_min + a) (concave or not)::

    max sum_i f_b(i)(a_i)   s.t.   sum_i a_i = need := total - P n_min,   0 <= a_i <= A-1.

Lagrangian reduced costs, then a shortest-path relaxation that is optimal whenever its plan fits the
bins, else the bounded-deviation DP of :mod:`gdro_lab.allocation.planner.dp`; the greedy directly when
every f_b is concave. Tested against brute force and scipy.optimize.milp
(tests/gdro_lab/allocation/planner/test_planner_exact.py). Departs from the paper: it maximises the
joint probability over prompts, where the paper's DP chooses one arm per bin (still offered as
``allocation.exact_budget_plan``). The method: docs/core-allocation-notes.md#gdro_lab-allocation-planner-exact; timings:
docs/benchmarks.md#gdro_lab-allocation-planner-exact.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from gdro_lab._rows import cached_arange, row_max
from gdro_lab.allocation.bin_plans import forbidden_floor, tie_broken
from gdro_lab.allocation.planner.dp import deviation_dp
from gdro_lab.allocation.planner.relax import feasible_plan, relaxed_plan, relaxed_plan_lists
from gdro_lab.checks import check_bins, check_log_prob, check_total


def exact_plan(log_prob_GA: np.ndarray, bins_P: np.ndarray, total: int, n_min: int, *,
               tie_center: float | None = None) -> np.ndarray:
    """Exact argmax of sum_i log p_b(i)(n_i) s.t. sum_i n_i = total, n_i in n_min..n_min+A-1.

    ``log_prob_GA[b, a]`` = log p_b(n_min + a), finite or -inf (never used; a ValueError if the total
    needs them); ``bins_P`` in [0, G). ``tie_center`` adds 1e-9 (n - tie_center)^2. Returns n_P (int64);
    earlier prompts of a bin get the larger arms. Concave rows take the greedy (module docstring).
    """
    values, arms = tie_broken(check_log_prob("exact_plan", log_prob_GA), n_min, tie_center)
    num_bins, num_arms = values.shape
    bins = check_bins("exact_plan", "bins_P", bins_P, num_bins, allow_unassigned=False)
    size = bins.size
    check_total("exact_plan", total, size, n_min, n_min + num_arms - 1)
    if size == 0:
        return np.zeros(0, np.int64)
    return plan_values(values, bins, int(total), n_min)


def plan_values(values: np.ndarray, bins: np.ndarray, total: int, n_min: int, try_concave: bool = True) -> np.ndarray:
    """:func:`exact_plan` on checked inputs: tie-broken values (G, A), bins in [0, G), at least one
    prompt, a total within [P n_min, P (n_min + A - 1)] (unchecked; Rollout-GDRO's plan calls this).
    ``try_concave=False`` skips the log-concavity test (Rollout-GDRO under bandit feedback, whose
    spiky rows are not concave): the general path is exact for any values."""
    num_bins, num_arms = values.shape
    size = bins.size
    need = total - size * n_min
    scale = float(np.maximum.reduce(np.abs(values), axis=None))
    all_finite = math.isfinite(scale)  # a NaN or inf anywhere makes the max non-finite
    counts_all = np.bincount(bins, minlength=num_bins)
    if num_arms > 2 and all_finite and try_concave:
        second = values[:, 2:] - 2.0 * values[:, 1:-1] + values[:, :-2]
        if np.maximum.reduce(second, axis=None) <= 0.0:  # log-concave rows: the greedy is the exact separable optimum
            return _place(bins, _descending_arms(num_arms, num_bins, n_min).repeat(
                _concave_greedy(values, counts_all, need)), num_bins)
    every_bin = bool(np.minimum.reduce(counts_all) > 0)
    present = cached_arange(num_bins) if every_bin else np.flatnonzero(counts_all)
    if all_finite:
        forbidden = None
        f_GA = values if every_bin else values[present]
    else:
        finite = values[np.isfinite(values)]
        scale = float(np.abs(finite).max()) if finite.size else 0.0
        f_GA, forbidden = forbidden_floor(values[present], size)
    # x_GA[g, a]: prompts of present bin g at arm a; earlier prompts of a bin get the larger arms
    x_GA = _solve(f_GA, counts_all if every_bin else counts_all[present], need, scale)
    n_P = _place(bins, _descending_arms(num_arms, present.size, n_min).repeat(x_GA[:, ::-1].ravel()), num_bins)
    used = forbidden & (x_GA > 0) if forbidden is not None else None
    if used is not None and used.any():
        raise ValueError(f"exact_plan: no plan with total {total} avoids arms of probability 0 "
                         f"(bin {present[used.any(axis=1).argmax()]}); allow more arms or change the total")
    return n_P


@functools.lru_cache(maxsize=64)
def _descending_arms(num_arms: int, num_bins: int, n_min: int) -> np.ndarray:
    """tile(n_min + arange(A)[::-1], G): arm value of each (bin, arm) slot, arms descending within a bin."""
    out = np.tile(n_min + np.arange(num_arms)[::-1], num_bins)
    out.flags.writeable = False
    return out


def _place(bins: np.ndarray, arms_sorted: np.ndarray, num_bins: int) -> np.ndarray:
    """n_P from the arms of the prompts in bin order (stable: batch order within a bin); bins in [0, num_bins)."""
    n_P = np.empty(bins.size, np.int64)
    # the same stable order on int8 (radix sort) when the bins fit: half the cost of sorting int64
    n_P[(bins.astype(np.int8) if num_bins <= 127 else bins).argsort(kind="stable")] = arms_sorted
    return n_P


def _concave_greedy(values: np.ndarray, counts: np.ndarray, need: int) -> list[int]:
    """Prompts per (bin, arm) of allocation.concave_budget_plan on rows already concave (same result,
    unchecked), flat in the layout of ``_descending_arms`` (bin-major, arms descending).
    """
    num_bins, num_arms = values.shape
    gains = values[:, 1:] - values[:, :-1]
    # arm-major increments, stably sorted by gain: ties resolve to the lower arm, then the lower bin
    # (the order of lexsort((arm, -gain)) on the bin-major layout, at half its cost)
    order = (-gains.T.ravel()).argsort(kind="stable")
    # grant the increments in that order, each to every prompt of its bin, until `need` are granted
    # (a handful of segments: a plain loop beats the numpy calls of a cumulative sum)
    per_bin = counts.tolist()
    increments = [0] * num_bins
    left = need
    for b in (order % num_bins).tolist():
        if left <= 0:
            break
        taken = min(per_bin[b], left)
        increments[b] += taken
        left -= taken
    top = num_arms - 1
    flat = [0] * (num_bins * num_arms)
    for b, (inc, c) in enumerate(zip(increments, per_bin)):
        if c:
            low = inc // c
            extra = inc - low * c
            at = b * num_arms + top - low  # slot of arm `low`; arm low + 1 is the slot before it
            flat[at] = c - extra
            if extra:
                flat[at - 1] = extra
    return flat


def _solve(f_GA: np.ndarray, c_G: np.ndarray, need: int, scale: float) -> np.ndarray:
    """Prompts per bin and arm, x_GA, maximising sum f with sum of arms = need (finite f).

    The relaxation (step 2) first; then the feasible plan if it meets the relaxation's bound;
    else the bounded-deviation DP (step 3).
    """
    num_bins, num_arms = f_GA.shape
    if num_arms == 1:
        return c_G[:, None].copy()
    lam = _dual(f_GA, c_G, need)
    adjusted = f_GA - lam * cached_arange(num_arms)
    r_GA = np.maximum(row_max(adjusted) - adjusted, 0.0)
    tol = 1e-12 * (1.0 + scale + abs(lam) * num_arms)
    quick = relaxed_plan_lists(r_GA.tolist(), c_G.tolist(), need, tol)
    if quick is not None:
        return quick  # the relaxation's optimum, from the reduced costs as lists (the usual bandit step)
    zero = r_GA <= tol
    lo_G = zero.argmax(axis=1)
    hi_G = num_arms - 1 - zero[:, ::-1].argmax(axis=1)
    r_GA[zero] = 0.0
    slack = tol * (int(np.add.reduce(c_G)) + 1)
    critical = (hi_G > lo_G).nonzero()[0].tolist()
    simple = int(np.count_nonzero(zero)) == num_bins + len(critical)  # zero cost only at lo_b and hi_b
    lower, relaxed = 0.0, None
    if simple and len(critical) <= 1:
        move_GA = np.where(zero, np.inf, r_GA)
        lower, relaxed = relaxed_plan(r_GA, move_GA, c_G, lo_G, hi_G, need, critical, 12)
        if relaxed is not None:
            return relaxed  # the relaxation's optimum fits the bins: optimal
    bound, heuristic = feasible_plan(r_GA, c_G, lo_G, hi_G, need)
    if heuristic is not None and bound > lower + slack and simple and len(critical) <= 1 and (r_GA > 0).any():
        # a near-tied arm: with fewer than (bound - slack) / cheapest costly prompts, the
        # relaxation may still settle it in a few more rounds (cost ~ rounds^2: at most 64)
        rounds = int(np.ceil((bound - slack) / r_GA[r_GA > 0].min())) - 1
        if 12 < rounds <= 64:
            lower, relaxed = relaxed_plan(r_GA, move_GA, c_G, lo_G, hi_G, need, critical, rounds)
            if relaxed is not None:
                return relaxed
    if heuristic is not None and bound <= lower + slack:
        return heuristic  # its cost meets a lower bound (0, or the relaxation's): optimal
    return deviation_dp(r_GA, c_G, lo_G, hi_G, need, bound, slack, heuristic)


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
    order = (-gains).argsort(kind="stable")
    cumulative = c_G.repeat(f_GA.shape[1] - 1)[order].cumsum()
    index = int(cumulative.searchsorted(max(need, 1)))
    return float(gains[order[min(index, order.size - 1)]])
