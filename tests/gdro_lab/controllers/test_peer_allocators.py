"""The per-prompt allocators as controllers: estimates, unseen prompts, exact budget, bin-level fallback."""

from __future__ import annotations

import numpy as np
import pytest

from gdro_lab import build
from gdro_lab.allocation.duet import duet_plan
from gdro_lab.allocation.knapsack import knapsack_plan
from gdro_lab.allocation.separable import separable_plan
from gdro_lab.allocation.vip import convex_plan
from gdro_lab.controllers.feedback import StepFeedback


def visit(controller, ids, counts, successes, bins):
    y = np.asarray(successes, bool)
    return controller.update(StepFeedback(ids, np.asarray(bins), np.asarray(counts), 2.0 * y - 1, y))


def test_knapsack_reads_the_last_16_rollouts_after_8():
    a = build("allocator", "knapsack", {"num_bins": 2, "n_max": 12}, seed=0)
    visit(a, ["x", "y"], [12, 4], [1] * 12 + [0, 1, 0, 0], [0, 1])
    visit(a, ["x"], [12], [0] * 12, [0])
    p, valid = a.estimates(a.stats.rows(["x", "y", "z"]))
    assert p[0] == pytest.approx(4 / 16) and valid.tolist() == [True, False, False]
    plan = a.plan(np.array([0, 1, 1]), ["x", "y", "z"])
    np.testing.assert_array_equal(plan, knapsack_plan(np.array([0.25, 0.5, 0.5]), np.array([True, False, False]),
                                                      12, 2, 12, 4))
    np.testing.assert_array_equal(a.plan(np.array([0, 1, 1])), [4, 4, 4])  # no ids: no history


@pytest.mark.parametrize("objective", ["paper", "code"])
def test_knapsack_plans_with_its_objective(objective):
    """The allocator passes its objective to the plan; the default is the paper's; the method table runs both
    (``knapsack``: the paper's, ``knapsack_code``: the released DP)."""
    from gdro_lab.methods import METHODS
    a = build("allocator", "knapsack", {"num_bins": 1, "n_bar": 3, "min_history": 1, "objective": objective}, seed=0)
    visit(a, ["x", "y"], [4, 10], [1, 1, 0, 0] + [1] + [0] * 9, [0, 0])   # p = 0.5, 0.1 (test_knapsack's hand case)
    plan = a.plan(np.array([0, 0]), ["x", "y"])
    np.testing.assert_array_equal(plan, {"paper": [4, 2], "code": [3, 3]}[objective])
    assert build("allocator", "knapsack", {}, seed=0).config.objective == "paper"
    assert dict(METHODS["knapsack"].allocator_overrides) == {"objective": "paper"}
    assert dict(METHODS["knapsack_code"].allocator_overrides) == {"objective": "code"}
    assert METHODS["knapsack_code"].allocator == "knapsack"


def test_vip_prior_mean_is_the_batch_success_rate_per_rollout():
    """m's observation is the batch's successes over its rollouts (x: 2 of 2, y: 1 of 6 -> 3/8), not the mean of the
    prompts' rates ((1 + 1/6) / 2 = 7/12): with unequal counts the two differ, and m sets an unseen prompt's
    weight kappa0 m (1 - m) / (kappa0 + 1)."""
    a = build("allocator", "vip", {"num_bins": 1, "prior_strength": 2.0, "success_ema": 0.1}, seed=0)
    metrics = visit(a, ["x", "y"], [2, 6], [1, 1] + [1, 0, 0, 0, 0, 0], [0, 0])
    assert a.success_mean == pytest.approx(3 / 8) and metrics["rollout/prior_success"] == pytest.approx(3 / 8)
    visit(a, ["x", "z"], [6, 2], [1] * 6 + [0, 0], [0, 0])                         # 6 of 8; per prompt 1/2
    m = 0.9 * 3 / 8 + 0.1 * 6 / 8
    assert a.success_mean == pytest.approx(m)
    unseen = a.weights(a.stats.rows(["new"]))
    assert unseen[0] == pytest.approx(2.0 * m * (1 - m) / 3.0)


def test_vip_weights_are_the_beta_posterior_and_unseen_prompts_get_n_bar():
    a = build("allocator", "vip", {"num_bins": 2, "prior_strength": 2.0, "history_decay": 0.5}, seed=0)
    visit(a, ["x", "y"], [4, 4], [1, 1, 1, 0, 0, 0, 0, 0], [0, 1])   # batch rate 3/8
    visit(a, ["x"], [2], [1, 1], [0])                                 # x: s = 0.5*3 + 2, n = 0.5*4 + 2
    m = 0.9 * 3 / 8 + 0.1 * 1.0
    a_x, b_x = 2 * m + 3.5, 2 * (1 - m) + 0.5
    w = a.weights(a.stats.rows(["x"]))
    assert w[0] == pytest.approx(a_x * b_x / ((a_x + b_x) * (a_x + b_x + 1)))
    ids = ["x", "y", "new"]
    plan = a.plan(np.array([0, 1, -1]), ids)
    assert plan[2] == 4 and plan.sum() == 12
    expected, _ = convex_plan(a.weights(a.stats.rows(["x", "y"])), 8, 2, 12, 1.0)
    np.testing.assert_array_equal(plan[:2], expected)


def test_duet_plans_every_prompt_in_proportion_to_the_posterior_variance():
    """DUET's score is VIP's posterior E[p (1 - p)] (hand-computed), an unseen prompt scores the prior's
    kappa0 m (1 - m) / (kappa0 + 1) and is planned with the others (VIP gives it n_bar); no ids: n_bar."""
    a = build("allocator", "duet", {"num_bins": 2, "prior_strength": 2.0, "history_decay": 0.5}, seed=0)
    visit(a, ["x", "y"], [4, 4], [1, 1, 1, 0, 0, 0, 0, 0], [0, 1])   # batch rate 3/8
    visit(a, ["x"], [2], [1, 1], [0])                                 # x: s = 0.5*3 + 2, n = 0.5*4 + 2
    m = 0.9 * 3 / 8 + 0.1 * 1.0
    a_x, b_x = 2 * m + 3.5, 2 * (1 - m) + 0.5                         # x: solved 7 of 8 (discounted)
    a_y, b_y = 2 * m + 0.0, 2 * (1 - m) + 4.0                         # y: 0 of 4
    score = [a_x * b_x / ((a_x + b_x) * (a_x + b_x + 1)), a_y * b_y / ((a_y + b_y) * (a_y + b_y + 1)),
             2 * m * (1 - m) / 3]
    np.testing.assert_allclose(a.weights(a.stats.rows(["x", "y", "new"])), score)
    plan = a.plan(np.array([0, 1, -1]), ["x", "y", "new"])
    np.testing.assert_array_equal(plan, duet_plan(np.array(score), 12, 2, 12)[0])
    # scores 0.169, 0.107, 0.164: 12 s / sum(s) = 4.61, 2.91, 4.47 (in the box); floors 4, 2, 4 and the two left
    # to the largest fractions (y, x)
    np.testing.assert_array_equal(plan, [5, 3, 4])
    np.testing.assert_array_equal(a.plan(np.array([0, 1, 1])), [4, 4, 4])


def test_cero_posterior_is_the_prior_plus_the_counts():
    """Beta(prior_a + s, prior_b + f) with the counts discounted per visit: prior (2, 3); x: 3 of 4, then 1 of 2 at
    decay 0.5 (s = 0.5 * 3 + 1, f = 0.5 * 1 + 1); an unseen prompt has the prior's v0 = 2 * 3 / (5 * 6)."""
    a = build("allocator", "cero", {"num_bins": 1, "prior_a": 2.0, "prior_b": 3.0, "history_decay": 0.5}, seed=0)
    visit(a, ["x"], [4], [1, 1, 0, 1], [0])
    np.testing.assert_allclose(a.values(a.stats.rows(["x", "new"])), [5 * 4 / (9 * 10), 0.2])
    visit(a, ["x"], [2], [0, 1], [0])
    assert a.values(a.stats.rows(["x"]))[0] == pytest.approx(4.5 * 4.5 / (9 * 10))


def test_cero_dual_steps_by_hand_and_plans_the_largest_duals():
    """theta0 = v0 e^(-n_bar / s); a visit moves theta by -eta / sqrt(t) (n - clip(s ln(v / theta), n_min, n_max))
    with v the posterior before the visit; lambda by eta_lambda (S - B) / B, S = CERO's own spend at the old theta."""
    import math
    cfg = {"num_bins": 1, "n_bar": 4, "saturation": 4.0, "dual_lr": 0.01, "budget_lr": 0.1}
    a = build("allocator", "cero", cfg, seed=0)
    theta0 = (1 / 6) * math.exp(-1.0)                      # Beta(1, 1): v0 = 1 / 6
    assert a.theta0 == pytest.approx(theta0) and a.mu == pytest.approx(theta0)
    np.testing.assert_array_equal(a.plan(np.zeros(3, int), ["x", "y", "z"]), [4, 4, 4])   # unseen: n_bar
    metrics = visit(a, ["x", "y"], [6, 2], [1, 0, 0, 0, 0, 0] + [1, 0], [0, 0])
    # first visit: the target at theta0 is n_bar, so theta = theta0 - 0.01 (n - 4); S = 2 + 2 (theta0 = mu: n_min)
    np.testing.assert_allclose(a.duals(a.stats.rows(["x", "y", "z"])), [theta0 - 0.02, theta0 + 0.02, theta0])
    mu = theta0 + 0.1 * (4 - 8) / 8
    assert a.mu == pytest.approx(mu) and metrics["rollout/mu"] == pytest.approx(mu)
    assert metrics["rollout/cero_spend_ratio"] == pytest.approx(0.5)
    np.testing.assert_array_equal(a.plan(np.zeros(3, int), ["x", "y", "z"]), [2, 6, 4])    # z unseen: n_bar
    np.testing.assert_array_equal(a.plan(np.zeros(2, int), ["x", "y"]), [2, 6])
    np.testing.assert_array_equal(a.plan(np.zeros(2, int), ["x", "x"]), [4, 4])             # equal duals share
    visit(a, ["y"], [8], [1, 1, 1, 1, 0, 0, 0, 0], [0])
    theta_y, v_y = theta0 + 0.02, 2 * 2 / (4 * 5)                   # y's posterior after 1 of 2: Beta(2, 2)
    target = min(max(4 * math.log(v_y / theta_y), 2), 12)
    expected = max(theta_y - 0.01 / math.sqrt(2) * (8 - target), 0.0)
    assert a.duals(a.stats.rows(["y"]))[0] == pytest.approx(expected)
    assert a.mu == pytest.approx(max(mu + 0.1 * (12 - 4) / 4, 0.0))   # y's theta > mu: CERO's own choice n_max
    np.testing.assert_array_equal(a.plan(np.zeros(2, int)), [4, 4])    # no ids: no history


def test_cero_resumes_exactly_from_its_state():
    """A state round trip mid-run (through the run directory's JSON encoding, into an allocator with another
    seed) continues with the same plans and metrics; the state holds the duals, lambda and the posterior."""
    import json

    from gdro_lab.runformat.runlog import decode_state, encode_state
    rng = np.random.default_rng(3)
    p = rng.beta(0.5, 0.5, 30)
    ids = [f"q{i}" for i in range(30)]

    def step(controller, t):
        pick = np.random.default_rng([t, 1]).choice(30, 12, replace=False)
        n = controller.plan(np.zeros(12, int), [ids[i] for i in pick])
        y = np.random.default_rng([t, 2]).random(n.sum()) < np.repeat(p[pick], n)
        return n, visit(controller, [ids[i] for i in pick], n, y, np.zeros(12, int))

    straight = build("allocator", "cero", {"num_bins": 1}, seed=0)
    for t in range(15):
        step(straight, t)
    state = straight.state_dict()
    assert {"mu", "prompts", "rng"} <= set(state) and "dual" in state["prompts"]
    resumed = build("allocator", "cero", {"num_bins": 1}, seed=9)
    resumed.load_state_dict(decode_state(json.loads(json.dumps(encode_state(state)))))
    plans = set()
    for t in range(15, 30):
        (n_a, m_a), (n_b, m_b) = step(straight, t), step(resumed, t)
        np.testing.assert_array_equal(n_a, n_b)
        assert m_a == m_b
        plans.add(tuple(n_a))
    assert len(plans) > 1 and max(max(n) for n in plans) > 4   # the plans do move


def test_gdro_prompt_shrinks_toward_the_bin_and_plans_the_square_root_law():
    rng = np.random.default_rng(2)
    a = build("allocator", "gdro_prompt", {"num_bins": 2, "history_decay": 1.0}, seed=0)
    p = np.r_[np.full(20, 0.0), np.full(20, 0.5)]
    ids = [f"q{i}" for i in range(40)]
    bins = np.r_[np.zeros(20, int), np.ones(20, int)]
    for _ in range(5):
        n = a.plan(bins, ids)
        y = rng.random(n.sum()) < np.repeat(p, n)
        visit(a, ids, n, y, bins)
    v = a.variances(bins, a.stats.rows(ids))
    assert v[:20].max() < 0.05 and v[20:].min() > 0.8       # never solved vs coin flips
    plan = a.plan(bins, ids)
    assert plan.sum() == 160 and plan[:20].max() == 2        # zero-variance prompts at n_min
    relative = np.maximum(v / v.mean(), 1e-3)
    cost = relative[:, None] * 4 / np.arange(2, 13) + a.mu * np.arange(2, 13) / 4
    np.testing.assert_array_equal(plan, separable_plan(cost[:, :-1] - cost[:, 1:], 160, 2))
    # an unseen prompt of bin 1 gets bin 1's prior; an unseen unassigned prompt gets n_bar
    unseen = a.plan(np.array([1, -1, 0]), ["new1", "new2", "q0"])
    assert unseen[1] == 4 and unseen[0] > unseen[2]
    state = a.state_dict()
    assert {"mu", "prior_mean", "prior_tau2", "prompts"} <= set(state)


def test_gdro_prompt_moves_the_price_toward_the_budget():
    a = build("allocator", "gdro_prompt", {"num_bins": 1, "dual_lr": 0.5, "mu_init": 0.2}, seed=0)
    ids = [f"q{i}" for i in range(8)]
    bins = np.zeros(8, int)
    visit(a, ids, [4] * 8, [1, 0] * 16, bins)
    a.plan(bins, ids)
    desired = a._desired_mean
    mu = a.mu
    visit(a, ids, [4] * 8, [1, 0] * 16, bins)
    assert desired > 4 and a.mu == pytest.approx(mu + 0.5 * (desired - 4) / 4)


@pytest.mark.parametrize("family,name", [("allocator", "knapsack"), ("allocator", "vip"), ("allocator", "duet"),
                                         ("allocator", "cero"), ("allocator", "gdro_prompt"), ("selector", "greso")])
def test_int_indices_of_a_shared_index_act_as_string_ids_and_states_cross_numberings(family, name):
    """A controller bound to a run's PromptIndex (indices, another numbering) acts exactly as one fed string
    ids, and either's state continues in the other (states carry the prompts' ids)."""
    import json

    from gdro_lab import PromptIndex
    from gdro_lab.runformat.runlog import decode_state, encode_state
    rng = np.random.default_rng(5)
    pool = [f"q{i}" for i in range(40)]
    p = rng.beta(0.5, 0.5, 40)
    index = PromptIndex(["other", *rng.permutation(pool)])  # a different numbering, shared with the controller
    config = {} if family == "selector" else {"num_bins": 3}
    by_id = build(family, name, config, seed=1)
    by_index = build(family, name, config, seed=1, prompts=index)

    def step(controller, t, ids, use_index):
        keys = index.lookup(ids) if use_index else ids
        bins = np.array([int(3 * p[pool.index(i)]) % 3 for i in ids])
        out = controller.plan(bins, keys) if family == "allocator" else controller.screen(keys)
        n = out if family == "allocator" else np.full(len(ids), 4)
        draw = np.random.default_rng([t, 9]).random(n.sum()) < np.repeat(p[[pool.index(i) for i in ids]], n)
        controller.update(StepFeedback(keys, bins, n, 2.0 * draw - 1, draw, prompts=index if use_index else None))
        return out

    for t in range(12):
        ids = [pool[i] for i in np.random.default_rng(t).choice(40, 16, replace=False)]
        np.testing.assert_array_equal(step(by_id, t, ids, False), step(by_index, t, ids, True))
    moved = build(family, name, config, seed=7)  # own index, string ids
    moved.load_state_dict(decode_state(json.loads(json.dumps(encode_state(by_index.state_dict())))))
    for t in range(12, 18):
        ids = [pool[i] for i in np.random.default_rng(t).choice(40, 16, replace=False)]
        np.testing.assert_array_equal(step(moved, t, ids, False), step(by_index, t, ids, True))


@pytest.mark.parametrize("family,name,values,message", [
    ("allocator", "knapsack", {"alpha": 1.5}, "alpha"),
    ("allocator", "knapsack", {"min_history": 0}, "min_history"),
    ("allocator", "knapsack", {"objective": "dp"}, r"objective.*one of 'paper', 'code'"),
    ("allocator", "vip", {"form": "drgrpo"}, "form"),
    ("allocator", "vip", {"eta": 0.5}, "has no field"),
    ("allocator", "duet", {"prior_strength": 0.0}, r"DUETConfig\.prior_strength=0\.0 is invalid"),
    ("allocator", "duet", {"success_ema": 1.5}, "success_ema"),
    ("allocator", "duet", {"form": "rloo"}, "DUETConfig has no field"),
    ("allocator", "cero", {"saturation": 0.0}, "saturation"),
    ("allocator", "cero", {"prior_a": -1.0}, "prior_a"),
    ("allocator", "cero", {"dual_lr": float("nan")}, "dual_lr"),
    ("allocator", "cero", {"history_decay": 1.5}, "history_decay"),
    ("allocator", "gdro_prompt", {"kappa_max": 0.1}, "kappa_max"),
    ("allocator", "gdro_prompt", {"n_bar": 20}, "n_bar"),
    ("selector", "greso", {"p_floor": 0.9, "p_ceiling": 0.5}, "p_ceiling"),
    ("selector", "dynamic_sampling", {"target_zero_variance": 2.0}, "target_zero_variance"),
])
def test_bad_configs_are_one_line_errors(family, name, values, message):
    from gdro_lab import ConfigError
    with pytest.raises(ConfigError, match=message) as info:
        build(family, name, values, seed=0)
    assert "\n" not in str(info.value)


def test_plans_refuse_mismatched_ids_and_bins():
    from gdro_lab import ConfigError
    for name in ("knapsack", "vip", "duet", "cero", "gdro_prompt"):
        allocator = build("allocator", name, {"num_bins": 2}, seed=0)
        with pytest.raises(ConfigError, match="prompt_ids"):
            allocator.plan(np.array([0, 1]), ["a"])
        with pytest.raises(ConfigError, match="bins_P"):
            allocator.plan(np.array([0, 5]), ["a", "b"])
