"""Tests of gdro_lab.allocation.sqrt_law against scipy, brute-force enumeration and naive references."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.optimize import Bounds, LinearConstraint, minimize

from gdro_lab.allocation.bin_plans import concave_budget_plan, concave_envelope, exact_budget_plan
from gdro_lab.allocation.sqrt_law import adjust_to_total, round_to_budget, sqrt_allocation, sqrt_allocation_unclipped

PROPERTY = settings(max_examples=120, deadline=None)


# ----------------------------------------------------------------------------- references

def variance_proxy(q, v, n) -> float:
    return float(np.sum(np.asarray(q) * np.asarray(v) / np.asarray(n)))


def scipy_box_sqrt(v, q, n_bar, n_min, n_max) -> np.ndarray:
    """argmin sum q v / n s.t. sum q n = n_bar sum q, n_min <= n <= n_max, with SLSQP."""
    q = np.asarray(q, float)
    v = np.asarray(v, float)
    scale = 1.0 / np.sum(q * v / n_bar)  # objective 1 at uniform n_bar: ftol is then relative
    result = minimize(lambda n: scale * np.sum(q * v / n), np.full(q.size, float(n_bar)),
                      jac=lambda n: -scale * q * v / n**2, method="SLSQP",
                      bounds=[(n_min, n_max)] * q.size,
                      constraints=[{"type": "eq", "fun": lambda n: q @ n - n_bar * q.sum(), "jac": lambda n: q}],
                      options={"ftol": 1e-14, "maxiter": 2000})
    assert result.success, result.message
    return result.x


def upper_hull_naive(values: np.ndarray) -> np.ndarray:
    """Upper concave envelope of (j, values[j]) at the integers, by Andrew's monotone chain."""
    hull: list[tuple[float, float]] = []
    for point in enumerate(values):
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            # drop the middle point when it lies on or below the chord from hull[-2] to point
            if (y2 - y1) * (point[0] - x1) <= (point[1] - y1) * (x2 - x1):
                hull.pop()
            else:
                break
        hull.append((float(point[0]), float(point[1])))
    xs, ys = zip(*hull)
    return np.interp(np.arange(len(values)), xs, ys)


def brute_force_bin_plans(log_prob, counts, total, n_min):
    """All one-arm-per-bin plans over the active bins: (sum, objective, arms of active bins)."""
    active = [b for b in range(len(counts)) if counts[b] > 0]
    num_arms = log_prob.shape[1]
    for choice in itertools.product(range(num_arms), repeat=len(active)):
        budget = sum(counts[b] * (n_min + a) for b, a in zip(active, choice))
        objective = sum(log_prob[b, a] for b, a in zip(active, choice))
        yield budget, objective, dict(zip(active, choice))


def maxplus_prompt_dp(env_GA, bins_P, total, n_min) -> float:
    """max sum_i env[b_i, a_i] s.t. sum_i (n_min + a_i) = total: exact DP over prompts."""
    num_arms = env_GA.shape[1]
    best = np.full(total + 1, -np.inf)
    best[0] = 0.0
    for b in bins_P:
        new = np.full(total + 1, -np.inf)
        for a in range(num_arms):
            shift = n_min + a
            if shift <= total:
                new[shift:] = np.maximum(new[shift:], best[: total + 1 - shift] + env_GA[b, a])
        best = new
    return float(best[total])


# ----------------------------------------------------------------------------- square-root law

@PROPERTY
@given(st.data())
def test_sqrt_unclipped_matches_formula_and_budget(data):
    size = data.draw(st.integers(1, 10), label="G")
    v = np.array(data.draw(st.lists(st.floats(0.0, 5.0), min_size=size, max_size=size), label="v"))
    q = np.array(data.draw(st.lists(st.floats(0.0, 1.0), min_size=size, max_size=size), label="q"))
    assume(np.dot(q, np.sqrt(v)) > 1e-6)
    n_bar = data.draw(st.floats(1.0, 10.0), label="n_bar")
    got = sqrt_allocation_unclipped(v, q, n_bar)
    denom = sum(qj * np.sqrt(vj) for qj, vj in zip(q, v))
    want = [n_bar * np.sqrt(vb) / denom for vb in v]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert float(q @ got) == pytest.approx(n_bar, rel=1e-10)  # sum_b q_b n_b = n_bar


def test_sqrt_unclipped_rejects_no_active_variance():
    with pytest.raises(ValueError):
        sqrt_allocation_unclipped(np.array([0.0, 1.0]), np.array([1.0, 0.0]), 4.0)


@pytest.mark.parametrize("seed", range(40))
def test_sqrt_allocation_equals_scipy_slsqp(seed):
    rng = np.random.default_rng(seed)
    size = int(rng.integers(2, 11))
    v = rng.uniform(0.01, 1.0, size) ** 2 * rng.choice([1.0, 10.0, 100.0])
    q = rng.dirichlet(np.ones(size))
    n_min, n_max = 2.0, 12.0
    n_bar = float(rng.uniform(n_min + 0.5, n_max - 0.5))
    got = sqrt_allocation(v, q, n_bar, n_min, n_max)
    want = scipy_box_sqrt(v, q, n_bar, n_min, n_max)
    ours, theirs = variance_proxy(q, v, got), variance_proxy(q, v, want)
    assert ours <= theirs * (1 + 1e-6)
    assert ours == pytest.approx(theirs, rel=1e-6)
    np.testing.assert_allclose(got, want, atol=2e-3 * n_max)


@pytest.mark.parametrize("seed", range(10))
def test_sqrt_allocation_equals_scipy_trust_constr_with_unnormalised_shares(seed):
    rng = np.random.default_rng(100 + seed)
    size = int(rng.integers(2, 8))
    v = rng.uniform(0.05, 3.0, size)
    q = rng.integers(1, 30, size).astype(float)  # counts, not shares: the budget is sum q n / sum q
    n_min, n_max, n_bar = 2.0, 12.0, 4.0
    got = sqrt_allocation(v, q, n_bar, n_min, n_max)
    result = minimize(lambda n: np.sum(q * v / n), np.full(size, n_bar), jac=lambda n: -q * v / n**2,
                      hess=lambda n: np.diag(2 * q * v / n**3), method="trust-constr",
                      bounds=Bounds(n_min, n_max), constraints=[LinearConstraint(q, n_bar * q.sum(), n_bar * q.sum())],
                      options={"gtol": 1e-12, "xtol": 1e-12, "maxiter": 5000})
    assert variance_proxy(q, v, got) == pytest.approx(variance_proxy(q, v, result.x), rel=1e-6)
    np.testing.assert_allclose(got, result.x, atol=1e-3 * n_max)


@PROPERTY
@given(st.data())
def test_sqrt_allocation_meets_budget_and_bounds(data):
    size = data.draw(st.integers(1, 12), label="G")
    v = np.array(data.draw(st.lists(st.floats(1e-4, 50.0), min_size=size, max_size=size), label="v"))
    q = np.array(data.draw(st.lists(st.floats(0.0, 1.0), min_size=size, max_size=size), label="q"))
    assume(q.sum() > 1e-3)
    n_min = data.draw(st.integers(1, 4), label="n_min")
    n_max = data.draw(st.integers(n_min, 16), label="n_max")
    n_bar = data.draw(st.floats(float(n_min), float(n_max)), label="n_bar")
    got = sqrt_allocation(v, q, n_bar, n_min, n_max)
    assert np.all(got >= n_min - 1e-12) and np.all(got <= n_max + 1e-12)
    active = q > 0
    assert float(q[active] @ got[active] / q[active].sum()) == pytest.approx(n_bar, rel=1e-9, abs=1e-9)
    # the optimum never does worse than uniform n_bar, which is feasible
    assert variance_proxy(q, v, got) <= variance_proxy(q, v, np.full(size, n_bar)) * (1 + 1e-9)


@PROPERTY
@given(st.data())
def test_sqrt_allocation_reduces_to_unclipped_inside_box(data):
    size = data.draw(st.integers(1, 10), label="G")
    v = np.array(data.draw(st.lists(st.floats(0.25, 4.0), min_size=size, max_size=size), label="v"))
    q = np.array(data.draw(st.lists(st.floats(0.01, 1.0), min_size=size, max_size=size), label="q"))
    q = q / q.sum()
    n_bar = 4.0
    unclipped = sqrt_allocation_unclipped(v, q, n_bar)
    n_min, n_max = 1.0, 20.0  # sqrt(v) ratio <= 4, so the unclipped plan is inside the box
    assert np.all((unclipped > n_min) & (unclipped < n_max))
    np.testing.assert_allclose(sqrt_allocation(v, q, n_bar, n_min, n_max), unclipped, rtol=1e-9)


def test_sqrt_allocation_kkt_form_by_hand():
    # v = (1, 100), q = (1/2, 1/2), n_bar = 4, box [2, 12]: unclipped (8/11, 80/11) puts bin 0
    # below n_min, so bin 0 is clipped to 2 and bin 1 takes the rest of the budget: 6.
    got = sqrt_allocation(np.array([1.0, 100.0]), np.array([0.5, 0.5]), 4.0, 2.0, 12.0)
    np.testing.assert_allclose(got, [2.0, 6.0], rtol=1e-12)


def test_sqrt_allocation_zero_share_bins_do_not_count_towards_budget():
    v = np.array([1.0, 4.0, 9.0])
    q = np.array([0.5, 0.5, 0.0])
    got = sqrt_allocation(v, q, 4.0, 1.0, 20.0)
    np.testing.assert_allclose(got[:2], sqrt_allocation_unclipped(v[:2], q[:2], 4.0), rtol=1e-9)


def test_sqrt_allocation_rejects_bad_inputs():
    with pytest.raises(ValueError):
        sqrt_allocation(np.ones(2), np.ones(2) / 2, 13.0, 2.0, 12.0)
    with pytest.raises(ValueError):
        sqrt_allocation(np.ones(2), np.zeros(2), 4.0, 2.0, 12.0)
    # no variance anywhere: every plan is equally good; uniform n_bar is returned
    np.testing.assert_array_equal(sqrt_allocation(np.zeros(3), np.ones(3) / 3, 4.0, 2.0, 12.0), [4.0] * 3)


def test_sqrt_allocation_budget_with_a_zero_variance_active_bin():
    v = np.array([1.0, 0.0])
    q = np.array([0.5, 0.5])
    got = sqrt_allocation(v, q, 10.0, 2.0, 12.0)  # got [12, 2]: mean 7, not 10
    assert np.all((got >= 2.0) & (got <= 12.0))
    assert float(q @ got / q.sum()) == pytest.approx(10.0)
    assert got[0] == pytest.approx(12.0)  # the bin with variance takes all it can


# ----------------------------------------------------------------------------- rounding

@PROPERTY
@given(st.data())
def test_round_to_budget_properties(data):
    size = data.draw(st.integers(1, 30), label="P")
    n_min = data.draw(st.integers(1, 4), label="n_min")
    n_max = data.draw(st.integers(n_min, 14), label="n_max")
    target = np.array(data.draw(st.lists(st.floats(n_min - 2.0, n_max + 2.0), min_size=size, max_size=size)))
    clipped = np.clip(target, n_min, n_max)
    mass = float(clipped.sum())
    total = data.draw(st.sampled_from([int(np.floor(mass)), int(np.ceil(mass))]), label="total")
    assume(size * n_min <= total <= size * n_max)
    got = round_to_budget(target, total, n_min, n_max)
    assert got.dtype.kind == "i"
    assert int(got.sum()) == total
    assert np.all((got >= n_min) & (got <= n_max))
    assert np.all(np.abs(got - clipped) <= 1.0 + 1e-9)


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_round_to_budget_is_closest_by_brute_force(data):
    size = data.draw(st.integers(1, 5), label="P")
    n_min, n_max = 2, 6
    target = np.array(data.draw(st.lists(st.floats(1.0, 7.0), min_size=size, max_size=size)))
    total = data.draw(st.integers(size * n_min, size * n_max), label="total")
    got = round_to_budget(target, total, n_min, n_max)
    clipped = np.clip(target, n_min, n_max)
    best = min(sum((n - t) ** 2 for n, t in zip(plan, clipped))
               for plan in itertools.product(range(n_min, n_max + 1), repeat=size) if sum(plan) == total)
    assert float(np.sum((got - clipped) ** 2)) == pytest.approx(best, abs=1e-9)


def test_round_to_budget_largest_remainder_by_hand():
    got = round_to_budget(np.array([2.2, 3.7, 4.5, 2.6]), 13, 2, 12)
    assert got.tolist() == [2, 4, 4, 3]  # floors (2,3,4,2) + 2: largest fractions 0.7 and 0.6
    with pytest.raises(ValueError):
        round_to_budget(np.array([4.0, 4.0]), 25, 2, 12)


@PROPERTY
@given(st.data())
def test_adjust_to_total_properties(data):
    size = data.draw(st.integers(1, 25), label="P")
    n_min, n_max = 2, 12
    start = np.array(data.draw(st.lists(st.integers(n_min, n_max), min_size=size, max_size=size)))
    total = data.draw(st.integers(size * n_min, size * n_max), label="total")
    preference = np.array(data.draw(st.lists(st.floats(-5, 5), min_size=size, max_size=size)))
    got = adjust_to_total(start, total, n_min, n_max, preference)
    assert int(got.sum()) == total
    assert np.all((got >= n_min) & (got <= n_max))
    change = got - start
    assert np.all(change >= 0) or np.all(change <= 0)  # one direction only
    # balanced: the largest move is as small as the bounds allow (water-filling)
    gap = total - int(start.sum())
    room = (n_max - start) if gap > 0 else (start - n_min)
    levels = 0
    while np.minimum(room, levels).sum() < abs(gap):
        levels += 1
    assert np.abs(change).max(initial=0) == levels


@PROPERTY
@given(st.data())
def test_adjust_to_total_within_one_and_follows_preference(data):
    size = data.draw(st.integers(1, 25), label="P")
    n_min, n_max = 2, 12
    start = np.array(data.draw(st.lists(st.integers(n_min + 1, n_max - 1), min_size=size, max_size=size)))
    gap = data.draw(st.integers(-size, size), label="gap")
    preference = np.array(data.draw(st.lists(st.floats(-5, 5), min_size=size, max_size=size)))
    got = adjust_to_total(start, int(start.sum()) + gap, n_min, n_max, preference)
    assert np.all(np.abs(got - start) <= 1)
    if gap > 0:
        want = sorted(range(size), key=lambda i: (-preference[i], i))[:gap]
    else:
        want = sorted(range(size), key=lambda i: (preference[i], i))[:-gap]
    assert sorted(np.flatnonzero(got != start).tolist()) == sorted(want)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_adjust_to_total_minimises_squared_change_by_brute_force(data):
    size = data.draw(st.integers(1, 5), label="P")
    n_min, n_max = 2, 6
    start = np.array(data.draw(st.lists(st.integers(n_min, n_max), min_size=size, max_size=size)))
    total = data.draw(st.integers(size * n_min, size * n_max), label="total")
    got = adjust_to_total(start, total, n_min, n_max)
    best = min(sum((n - s) ** 2 for n, s in zip(plan, start))
               for plan in itertools.product(range(n_min, n_max + 1), repeat=size) if sum(plan) == total)
    assert int(np.sum((got - start) ** 2)) == best


def test_adjust_to_total_unreachable_raises():
    with pytest.raises(ValueError):
        adjust_to_total(np.array([12, 12]), 25, 2, 12)
    with pytest.raises(ValueError):
        adjust_to_total(np.array([2, 2]), 3, 2, 12)


# ----------------------------------------------------------------------------- paper DP

@settings(max_examples=150, deadline=None)
@given(st.data())
def test_exact_budget_plan_equals_brute_force(data):
    num_bins = data.draw(st.integers(1, 4), label="G")
    num_arms = data.draw(st.integers(2, 6), label="A")
    n_min = data.draw(st.integers(1, 3), label="n_min")
    counts = np.array(data.draw(st.lists(st.integers(0, 6), min_size=num_bins, max_size=num_bins), label="c"))
    log_prob = np.log(np.array(data.draw(st.lists(st.floats(0.01, 1.0), min_size=num_bins * num_arms,
                                                  max_size=num_bins * num_arms)))).reshape(num_bins, num_arms)
    lo = int(counts.sum()) * n_min
    hi = int(counts.sum()) * (n_min + num_arms - 1)
    total = data.draw(st.integers(max(lo - 3, 0), hi + 3), label="total")
    n_G, exact = exact_budget_plan(log_prob, counts, total, n_min)
    arms = n_G - n_min
    assert n_G.shape == (num_bins,)
    active = counts > 0
    assert np.all((arms[active] >= 0) & (arms[active] < num_arms))
    assert np.all(n_G[~active] == n_min)
    plans = list(brute_force_bin_plans(log_prob, counts, total, n_min))
    feasible = [obj for budget, obj, _ in plans if budget == total]
    assert exact == bool(feasible)
    spent = int(counts @ n_G)
    objective = float(sum(log_prob[b, arms[b]] for b in np.flatnonzero(active)))
    if exact:
        assert spent == total
        assert objective == pytest.approx(max(feasible), abs=1e-12)
    else:
        closest = min(abs(budget - total) for budget, _, _ in plans)
        assert abs(spent - total) == closest
        assert objective == pytest.approx(max(obj for budget, obj, _ in plans if budget == spent), abs=1e-12)


def test_exact_budget_plan_no_active_bins():
    n_G, exact = exact_budget_plan(np.zeros((3, 4)), np.zeros(3, int), 0, 2)
    assert exact and n_G.tolist() == [2, 2, 2]
    _, exact = exact_budget_plan(np.zeros((3, 4)), np.zeros(3, int), 8, 2)
    assert not exact


@PROPERTY
@given(st.data())
def test_exact_budget_plan_tie_center_gives_uniform_when_probabilities_are_equal(data):
    num_bins = data.draw(st.integers(1, 10), label="G")
    counts = np.array(data.draw(st.lists(st.integers(0, 40), min_size=num_bins, max_size=num_bins)))
    assume(counts.sum() > 0)
    n_bar = data.draw(st.integers(2, 12), label="n_bar")
    log_prob = np.full((num_bins, 11), np.log(1 / 11))
    n_G, exact = exact_budget_plan(log_prob, counts, int(counts.sum()) * n_bar, 2, tie_center=n_bar)
    assert exact and np.all(n_G == n_bar)


# ----------------------------------------------------------------------------- concave envelope

@PROPERTY
@given(st.data())
def test_concave_envelope_against_upper_hull(data):
    num_bins = data.draw(st.integers(1, 5), label="G")
    num_arms = data.draw(st.integers(1, 11), label="A")
    values = np.array(data.draw(st.lists(st.floats(-20.0, 5.0), min_size=num_bins * num_arms,
                                         max_size=num_bins * num_arms))).reshape(num_bins, num_arms)
    env = concave_envelope(values)
    assert env.shape == values.shape
    assert np.all(env >= values - 1e-12)
    if num_arms >= 3:
        assert np.all(np.diff(env, 2, axis=1) <= 1e-9)
    np.testing.assert_allclose(env[:, [0, -1]], values[:, [0, -1]], rtol=1e-12, atol=1e-12)  # ends on the hull
    for b in range(num_bins):
        np.testing.assert_allclose(env[b], upper_hull_naive(values[b]), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(concave_envelope(env), env, atol=1e-10)  # idempotent


@PROPERTY
@given(st.data())
def test_concave_envelope_keeps_concave_rows(data):
    num_arms = data.draw(st.integers(2, 11), label="A")
    steps = sorted(data.draw(st.lists(st.floats(-3.0, 3.0), min_size=num_arms - 1, max_size=num_arms - 1)),
                   reverse=True)  # non-increasing increments: a concave row
    row = np.concatenate([[0.0], np.cumsum(steps)])
    np.testing.assert_allclose(concave_envelope(row[None, :])[0], row, atol=1e-9)


def test_concave_envelope_by_hand():
    env = concave_envelope(np.array([[0.0, -4.0, 0.0, -1.0, -2.0]]))
    np.testing.assert_allclose(env[0], [0.0, 0.0, 0.0, -1.0, -2.0])


def test_concave_envelope_with_minus_infinity():
    values = np.array([[-np.inf, 0.0, -1.0, -np.inf]])
    with np.errstate(invalid="ignore"):
        env = concave_envelope(values)
    np.testing.assert_array_equal(env, values)


# ----------------------------------------------------------------------------- concave budget plan

def _plan_objective(env, bins, plan, n_min) -> float:
    return float(sum(env[b, n - n_min] for b, n in zip(bins, plan)))


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_concave_budget_plan_equals_brute_force(data):
    size = data.draw(st.integers(1, 5), label="P")
    num_bins = data.draw(st.integers(1, 3), label="G")
    num_arms = data.draw(st.integers(2, 4), label="A")  # arms 2..5
    n_min = 2
    bins = np.array(data.draw(st.lists(st.integers(0, num_bins - 1), min_size=size, max_size=size)))
    log_prob = np.log(np.array(data.draw(st.lists(st.floats(0.01, 1.0), min_size=num_bins * num_arms,
                                                  max_size=num_bins * num_arms)))).reshape(num_bins, num_arms)
    total = data.draw(st.integers(size * n_min, size * (n_min + num_arms - 1)), label="total")
    plan = concave_budget_plan(log_prob, bins, total, n_min)
    assert plan.shape == (size,) and plan.dtype.kind == "i"
    assert int(plan.sum()) == total
    assert np.all((plan >= n_min) & (plan <= n_min + num_arms - 1))
    env = np.array([upper_hull_naive(row) for row in log_prob])
    best = max(_plan_objective(env, bins, cand, n_min)
               for cand in itertools.product(range(n_min, n_min + num_arms), repeat=size) if sum(cand) == total)
    assert _plan_objective(env, bins, plan, n_min) == pytest.approx(best, abs=1e-9)
    for b in np.unique(bins):  # within a bin, prompts sit on two adjacent arms
        assert np.ptp(plan[bins == b]) <= 1


@pytest.mark.parametrize("seed", range(15))
def test_concave_budget_plan_equals_prompt_dp_at_paper_size(seed):
    rng = np.random.default_rng(seed)
    num_bins, num_arms, n_min, n_bar = 10, 11, 2, 4
    size = int(rng.integers(20, 80))
    bins = rng.integers(0, num_bins, size)
    logits = rng.normal(0, 2, (num_bins, num_arms))
    probs = 0.99 * np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True) + 0.01 / num_arms
    log_prob = np.log(probs)
    total = size * n_bar
    plan = concave_budget_plan(log_prob, bins, total, n_min)
    assert int(plan.sum()) == total
    env = concave_envelope(log_prob)
    assert _plan_objective(env, bins, plan, n_min) == pytest.approx(
        maxplus_prompt_dp(env, bins, total, n_min), abs=1e-8)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_concave_budget_plan_on_log_concave_probabilities_maximises_raw_objective(data):
    size = data.draw(st.integers(1, 5), label="P")
    num_arms = data.draw(st.integers(2, 4), label="A")
    steps = np.array(data.draw(st.lists(st.floats(-3.0, 3.0), min_size=2 * (num_arms - 1),
                                        max_size=2 * (num_arms - 1)))).reshape(2, num_arms - 1)
    log_prob = np.concatenate([np.zeros((2, 1)), np.cumsum(-np.sort(-steps, axis=1), axis=1)], axis=1)
    bins = np.array(data.draw(st.lists(st.integers(0, 1), min_size=size, max_size=size)))
    total = data.draw(st.integers(2 * size, (1 + num_arms) * size), label="total")
    plan = concave_budget_plan(log_prob, bins, total, 2)
    best = max(_plan_objective(log_prob, bins, cand, 2)
               for cand in itertools.product(range(2, 2 + num_arms), repeat=size) if sum(cand) == total)
    assert _plan_objective(log_prob, bins, plan, 2) == pytest.approx(best, abs=1e-8)


@PROPERTY
@given(st.data())
def test_concave_budget_plan_tie_center_uniform_when_probabilities_equal(data):
    size = data.draw(st.integers(1, 60), label="P")
    num_bins = data.draw(st.integers(1, 10), label="G")
    n_bar = data.draw(st.integers(2, 12), label="n_bar")
    bins = np.array(data.draw(st.lists(st.integers(0, num_bins - 1), min_size=size, max_size=size)))
    log_prob = np.full((num_bins, 11), np.log(1 / 11))
    plan = concave_budget_plan(log_prob, bins, size * n_bar, 2, tie_center=n_bar)
    assert np.all(plan == n_bar)


def test_concave_budget_plan_rejects_unreachable_total():
    with pytest.raises(ValueError):
        concave_budget_plan(np.zeros((2, 3)), np.array([0, 1]), 3, 2)
    with pytest.raises(ValueError):
        concave_budget_plan(np.zeros((2, 3)), np.array([0, 1]), 9, 2)


# ----------------------------------------------------------------------------- unboxed / half-boxed square-root law

def test_sqrt_allocation_unboxed_is_the_unclipped_law():
    rng = np.random.default_rng(4)
    for _ in range(50):
        v = rng.exponential(size=6) * (rng.random(6) < 0.85)
        q = rng.dirichlet(np.ones(6))
        if q @ np.sqrt(v) == 0:
            continue
        n = sqrt_allocation(v, q, 4.0, 0.0, math.inf)
        np.testing.assert_allclose(n[v > 0], sqrt_allocation_unclipped(v, q, 4.0)[v > 0], rtol=1e-12)
        assert float(q @ n) == pytest.approx(4.0, rel=1e-12)


@pytest.mark.parametrize("n_min,n_max", [(2.0, math.inf), (0.0, 7.0), (1.0, math.inf)])
def test_sqrt_allocation_half_boxed_is_kkt_correct(n_min, n_max):
    rng = np.random.default_rng(5)
    for _ in range(50):
        v = rng.exponential(size=5) ** 3
        q = rng.dirichlet(np.ones(5))
        n = sqrt_allocation(v, q, 4.0, n_min, n_max)
        assert np.all(np.isfinite(n)) and np.all(n >= n_min - 1e-12) and np.all(n <= n_max + 1e-12)
        assert float(q @ n) == pytest.approx(4.0, rel=1e-12)
        # KKT: one price mu with n_b = clip(sqrt(v_b / mu), n_min, n_max)
        free = (n > n_min + 1e-9) & (n < n_max - 1e-9)
        mu = v[free] / n[free] ** 2
        if mu.size:
            assert np.ptp(mu) <= 1e-9 * mu.max()
            assert np.all(v[n <= n_min + 1e-9] / n_min**2 <= mu[0] * (1 + 1e-9)) if n_min > 0 else True
            assert np.all(v[n >= n_max - 1e-9] / n_max**2 >= mu[0] * (1 - 1e-9))


def test_se_report_is_honest_with_an_unbounded_box():
    from gdro_lab.functional.diagnostics import se_report
    q = np.array([0.5, 0.3, 0.2])
    sigma = np.array([1.0, 0.5, 0.1])
    report = se_report(q, sigma, np.full(3, 4.0), 4, 0, math.inf)
    n = sqrt_allocation_unclipped(sigma**2, q, 4.0)
    expected = float(np.sum(q * sigma / np.sqrt(n)))
    assert report["se_sqrt"] == pytest.approx(expected, rel=1e-12)
    assert 0.0 < report["se_sqrt_reduction_pct"] < 100.0


def test_the_fast_path_of_sqrt_law_equals_the_array_solve():
    """Lists of floats take the plain-Python walk over the budget's knots; equal to the numpy interpolation
    on arrays, boxed and unboxed (random draws, with zero-variance and zero-share bins)."""
    from gdro_lab.allocation.sqrt_law import sqrt_law

    rng = np.random.default_rng(7)
    for _ in range(3000):
        size = int(rng.integers(1, 12))
        variance = rng.random(size) ** 2 * (rng.random(size) > 0.15)
        share = rng.random(size) * (rng.random(size) > 0.2)
        share[0] += share.sum() == 0
        n_min, n_max = float(rng.choice([0, 1, 2])), float(rng.choice([8, 12, np.inf]))
        n_bar = float(rng.uniform(n_min, min(n_max, 20)))
        expected = sqrt_law(variance, share, n_bar, n_min, n_max)
        got = sqrt_law(variance.tolist(), share.tolist(), n_bar, n_min, n_max)
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)
