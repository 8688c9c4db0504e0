"""The exact planner against brute force and scipy.optimize.milp, on concave and non-concave arm distributions.

The old per-prompt planner was exact only when each bin's log-probabilities were concave in n;
under bandit feedback they are not, and it scored up to hundreds of nats below the optimum.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import Bounds, LinearConstraint, milp

from gdro_lab.allocation.bin_plans import exact_budget_plan
from gdro_lab.allocation.planner.exact import exact_plan
from gdro_lab.controllers.allocators import AllocatorConfig
from gdro_lab.controllers.feedback import StepFeedback
from gdro_lab.controllers.rollout_gdro import RolloutGDRO


def brute_force(log_prob, bins, total, n_min):
    """max sum_i f[b_i, a_i] over every assignment with sum n_i = total."""
    num_arms = log_prob.shape[1]
    best = -np.inf
    for arms in itertools.product(range(num_arms), repeat=len(bins)):
        if sum(arms) + n_min * len(bins) == total:
            best = max(best, sum(log_prob[b, a] for b, a in zip(bins, arms)))
    return best


def milp_optimum(log_prob, bins, total, n_min):
    """Integer counts x[b, a] >= 0 with sum_a x[b, a] = c_b and sum_{b,a} a x[b, a] = total - P n_min."""
    num_bins, num_arms = log_prob.shape
    counts = np.bincount(bins, minlength=num_bins)
    rows = [np.kron(np.eye(num_bins)[b], np.ones(num_arms)) for b in range(num_bins)]
    rows.append(np.tile(np.arange(num_arms, dtype=float), num_bins))
    rhs = np.concatenate([counts, [total - bins.size * n_min]]).astype(float)
    result = milp(-log_prob.ravel(), constraints=LinearConstraint(np.array(rows), rhs, rhs),
                  integrality=np.ones(num_bins * num_arms), bounds=Bounds(0, np.inf),
                  options={"mip_rel_gap": 0.0, "time_limit": 60})
    assert result.success, result.message
    return float(log_prob.ravel() @ np.round(result.x))


def bandit_like_log_probs(rng, num_bins, num_arms):
    """log softmax of importance-weighted cumulative costs: spiky and non-concave, as under bandit feedback."""
    logits = np.zeros((num_bins, num_arms))
    for _ in range(int(rng.integers(3, 400))):
        arm = rng.integers(0, num_arms, size=num_bins)
        logits[np.arange(num_bins), arm] -= rng.exponential(rng.choice([0.5, 5.0, 40.0]), size=num_bins)
    return logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)


def random_log_probs(rng, num_bins, num_arms):
    kind = rng.integers(0, 4)
    if kind == 0:
        return bandit_like_log_probs(rng, num_bins, num_arms)
    if kind == 1:  # concave (full feedback: minus a sum of convex costs)
        arms = np.arange(num_arms)
        return -rng.exponential(size=(num_bins, 1)) * (arms - rng.uniform(0, num_arms, (num_bins, 1))) ** 2
    if kind == 2:  # integer values: many ties
        return rng.integers(-4, 1, size=(num_bins, num_arms)).astype(float)
    return rng.normal(scale=rng.choice([0.1, 3.0, 50.0]), size=(num_bins, num_arms))


def objective(log_prob, bins, plan, n_min):
    return float(log_prob[bins, plan - n_min].sum())


@pytest.mark.parametrize("seed", range(6))
def test_exact_plan_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    for _ in range(60):
        num_bins, num_arms, size = int(rng.integers(1, 4)), int(rng.integers(1, 6)), int(rng.integers(1, 7))
        log_prob = random_log_probs(rng, num_bins, num_arms)
        bins = rng.integers(0, num_bins, size=size)
        n_min = int(rng.integers(0, 3))
        total = int(rng.integers(size * n_min, size * (n_min + num_arms - 1) + 1))
        plan = exact_plan(log_prob, bins, total, n_min)
        assert plan.sum() == total and plan.min() >= n_min and plan.max() <= n_min + num_arms - 1
        best = brute_force(log_prob, bins, total, n_min)
        assert objective(log_prob, bins, plan, n_min) == pytest.approx(best, rel=0, abs=1e-9 * max(1, abs(best)))


@pytest.mark.parametrize("seed", range(4))
def test_exact_plan_equals_milp_on_random_non_concave_instances(seed):
    rng = np.random.default_rng(100 + seed)
    for _ in range(8):
        num_bins, num_arms, size = int(rng.integers(2, 7)), int(rng.integers(3, 12)), int(rng.integers(5, 80))
        log_prob = random_log_probs(rng, num_bins, num_arms)
        bins = rng.integers(0, num_bins, size=size)
        total = int(rng.integers(size * 2, size * (num_arms + 1) + 1))
        plan = exact_plan(log_prob, bins, total, 2)
        assert plan.sum() == total
        best = milp_optimum(log_prob, bins, total, 2)
        assert objective(log_prob, bins, plan, 2) == pytest.approx(best, rel=0, abs=1e-9 * max(1, abs(best)))


@pytest.mark.parametrize("seed", range(3))
def test_exact_plan_equals_milp_at_paper_scale(seed):
    """256 prompts, 10 bins, arms 2..12, n_bar = 4: bandit-like, concave and random log-probabilities."""
    rng = np.random.default_rng(200 + seed)
    for _ in range(4):
        log_prob = random_log_probs(rng, 10, 11)
        bins = rng.choice(10, size=256, p=rng.dirichlet(np.full(10, rng.choice([0.3, 1.0, 5.0]))))
        plan = exact_plan(log_prob, bins, 256 * 4, 2)
        assert plan.sum() == 256 * 4
        best = milp_optimum(log_prob, bins, 256 * 4, 2)
        assert objective(log_prob, bins, plan, 2) == pytest.approx(best, rel=0, abs=1e-9 * max(1, abs(best)))


def test_exact_plan_never_uses_a_zero_probability_arm_when_it_can_avoid_it():
    log_prob = np.array([[0.0, -np.inf, -np.inf, -5.0], [-1.0, -0.5, -np.inf, -0.1]])
    bins = np.array([0, 0, 1, 1, 1])
    plan = exact_plan(log_prob, bins, 5 * 2 + 6, 2)
    assert np.all(np.isfinite(log_prob[bins, plan - 2]))
    assert objective(log_prob, bins, plan, 2) == pytest.approx(brute_force(log_prob, bins, 16, 2))
    with pytest.raises(ValueError, match="probability 0"):
        exact_plan(np.array([[0.0, -np.inf, -np.inf]]), np.array([0]), 3, 2)


def test_exact_plan_within_a_bin_earlier_prompts_get_larger_arms():
    for log_prob in (np.array([[-3.0, 0.0, -3.0, -0.1]]), np.array([[-3.0, -1.0, -0.5, -0.9]])):  # bent, concave
        plan = exact_plan(log_prob, np.zeros(4, int), 4 * 2 + 6, 2)
        assert plan.sum() == 14 and np.all(np.diff(plan) <= 0)


@pytest.mark.parametrize("weight", ["count", "bin"])
def test_one_arm_per_bin_dp_both_objectives_equal_brute_force(weight):
    rng = np.random.default_rng(7)
    for _ in range(60):
        num_bins, num_arms = int(rng.integers(1, 4)), int(rng.integers(2, 6))
        log_prob = random_log_probs(rng, num_bins, num_arms)
        counts = rng.integers(0, 5, size=num_bins)
        arms = 2 + np.arange(num_arms)
        plans = {}
        for choice in itertools.product(range(num_arms), repeat=num_bins):
            total = int(sum(counts[b] * arms[a] for b, a in enumerate(choice)))
            w = counts if weight == "count" else (counts > 0).astype(float)
            value = sum(w[b] * log_prob[b, a] for b, a in enumerate(choice) if counts[b] > 0)
            plans[total] = max(plans.get(total, -np.inf), value)
        total = int(rng.choice(list(plans)))
        n_G, exact = exact_budget_plan(log_prob, counts, total, 2, weight=weight)
        assert exact
        w = counts if weight == "count" else (counts > 0).astype(float)
        got = sum(w[b] * log_prob[b, n_G[b] - 2] for b in range(num_bins) if counts[b] > 0)
        assert int(counts @ n_G) == total
        assert got == pytest.approx(plans[total], abs=1e-9)


def test_count_weight_is_the_joint_probability_of_one_arm_per_bin_plans():
    """Bin 0 holds 2 prompts, bin 1 one; total 14 = 2 n_0 + n_1 forces one bin off its mode 4.

    'bin' (the released code) compares log p_0(5) with log p_1(6) and moves bin 0 (0.06 > 0.05);
    'count' (the paper's joint probability) pays bin 0's move twice and moves bin 1.
    """
    log_prob = np.log(np.array([[0.01, 0.01, 0.88, 0.06, 0.04], [0.01, 0.01, 0.9, 0.03, 0.05]]))
    counts = np.array([2, 1])
    n_count, exact_count = exact_budget_plan(log_prob, counts, 14, 2, weight="count")
    n_bin, exact_bin = exact_budget_plan(log_prob, counts, 14, 2, weight="bin")
    assert exact_count and exact_bin
    np.testing.assert_array_equal(n_count, [4, 6])
    np.testing.assert_array_equal(n_bin, [5, 4])


@pytest.mark.parametrize("mode", ["full", "bandit"])
def test_rollout_gdro_executes_the_exact_optimum(mode):
    rng = np.random.default_rng(3)
    controller = RolloutGDRO(AllocatorConfig(num_bins=5, feedback=mode, eta=0.65 if mode == "full" else 0.3),
                             seed=4)
    success = np.array([0.05, 0.3, 0.5, 0.7, 0.97])
    for step in range(40):
        bins = rng.integers(0, 5, size=48)
        plan = controller.plan(bins)
        if step % 8 == 7:
            log_soft = controller.logits_GA - np.logaddexp.reduce(controller.logits_GA, axis=1, keepdims=True)
            best = milp_optimum(log_soft, bins, 48 * 4, 2)
            got = objective(log_soft, bins, plan, 2)
            assert got == pytest.approx(best, abs=1e-6 * max(1.0, abs(best)))  # 1e-9 (n-4)^2 tie-break
        outcome = rng.random(plan.sum()) < np.repeat(success[bins], plan)
        controller.update(StepFeedback([str(i) for i in range(48)], bins, plan, 2.0 * outcome - 1, outcome))


def test_exact_plan_equals_milp_on_bandit_rollout_gdro_at_paper_scale():
    """256 prompts, 10 bins, arms 2..12 under bandit feedback (spiky, near-tied arms): every 12th
    plan of a real controller run equals the MILP optimum of the tie-broken objective."""
    rng = np.random.default_rng(11)
    controller = RolloutGDRO(AllocatorConfig(num_bins=10, feedback="bandit"), seed=5)
    success = rng.beta(0.5, 0.5, size=10)
    weights = rng.dirichlet(np.ones(10))
    for step in range(72):
        bins = rng.choice(10, size=256, p=weights)
        plan = controller.plan(bins)
        assert plan.sum() == 256 * 4
        if step % 12 == 11:
            log_soft = controller.logits_GA - np.logaddexp.reduce(controller.logits_GA, axis=1, keepdims=True)
            values = log_soft - 1e-9 * (np.arange(2, 13) - 4.0) ** 2  # the planner's tie-break toward n_bar
            best = milp_optimum(values, bins, 256 * 4, 2)
            assert objective(values, bins, plan, 2) == pytest.approx(best, rel=0, abs=1e-9 * max(1, abs(best)))
        outcome = rng.random(plan.sum()) < np.repeat(success[bins], plan)
        controller.update(StepFeedback([str(i) for i in range(256)], bins, plan, 2.0 * outcome - 1, outcome))


def test_exact_plan_near_ties_long_relaxation_and_dp_fallback_equal_milp(monkeypatch):
    """Bandit steps whose relaxation runs out of rounds (a near-tied arm) take the longer
    relaxation or the bounded-deviation DP; those plans equal the MILP optimum too."""
    import gdro_lab.allocation.planner.exact as planner

    used: list[str] = []
    relaxed, fallback = planner.relaxed_plan, planner.deviation_dp
    monkeypatch.setattr(planner, "relaxed_plan", lambda *a: (used.append("long") if a[7] > 12 else None, relaxed(*a))[1])
    monkeypatch.setattr(planner, "deviation_dp", lambda *a: (used.append("dp"), fallback(*a))[1])
    rng = np.random.default_rng(11)
    controller = RolloutGDRO(AllocatorConfig(num_bins=10, feedback="bandit"), seed=5)
    success = rng.beta(0.5, 0.5, size=10)
    weights = rng.dirichlet(np.full(10, 2.0))
    checked = set()
    for _ in range(130):
        bins = rng.choice(10, size=256, p=weights)
        before = len(used)
        plan = controller.plan(bins)
        if len(used) > before:
            checked.update(used[before:])
            log_soft = controller.logits_GA - np.logaddexp.reduce(controller.logits_GA, axis=1, keepdims=True)
            values = log_soft - 1e-9 * (np.arange(2, 13) - 4.0) ** 2
            best = milp_optimum(values, bins, 256 * 4, 2)
            assert plan.sum() == 256 * 4
            assert objective(values, bins, plan, 2) == pytest.approx(best, rel=0, abs=1e-9 * max(1, abs(best)))
        outcome = rng.random(plan.sum()) < np.repeat(success[bins], plan)
        controller.update(StepFeedback([str(i) for i in range(256)], bins, plan, 2.0 * outcome - 1, outcome))
    assert checked == {"long", "dp"}  # both rare paths were exercised
