"""Every update rule against values computed by hand, both as a pure function and inside its controller.

The controller-level tests check the numbers a controller's state holds after one or two updates
with hand-derived inputs, so a swapped beta, an absent bin that moves, or a wrong importance
weight changes a number these tests pin.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gdro_lab.controllers.allocators import AllocatorConfig, UniformAllocator
from gdro_lab.controllers.feedback import StepFeedback
from gdro_lab.controllers.prompt_gdro import PromptGDRO, WeighterConfig
from gdro_lab.controllers.rollout_gdro import RolloutGDRO
from gdro_lab.functional.update_rules import (arm_costs, debiased_signal, dual_step, ema_from_first, entropic_weights,
                                              exp3p_probabilities, importance_weighted_cost, log_sum_exp_surrogate,
                                              mirror_descent_step, omega)

NAN = float("nan")


# ----------------------------------------------------------------------------- pure functions

def test_ema_from_first_by_hand():
    previous = np.array([NAN, 2.0, 4.0, NAN])
    observed = np.array([1.0, 6.0, NAN, NAN])
    out = ema_from_first(previous, observed, 0.25)
    # bin 0: first observation -> 1; bin 1: 0.75*2 + 0.25*6 = 3; bin 2 absent: 4; bin 3 never: NaN
    np.testing.assert_array_equal(out[:3], [1.0, 3.0, 4.0])
    assert math.isnan(out[3])
    assert math.isnan(previous[0]) and previous[1] == 2.0  # inputs untouched


def test_debiased_signal_by_hand():
    # B = 4; shares (0.5, 0.25, 0.25, 0): B q = (2, 1, 1, 0) floored at 0.1
    out = debiased_signal(np.array([0.6, 0.3, 0.9, NAN]), np.array([0.5, 0.25, 0.25, 0.0]), 0.1)
    np.testing.assert_allclose(out[:3], [0.3, 0.3, 0.9], rtol=0, atol=1e-15)
    assert math.isnan(out[3])
    # floor binds: share 0.01 with B = 2 -> B q = 0.02 < 0.5
    assert debiased_signal(np.array([0.4, 0.4]), np.array([0.01, 0.99]), 0.5)[0] == pytest.approx(0.8)


def test_omega_and_entropic_weights_by_hand():
    score = np.array([0.0, 1.0, 10.0])
    np.testing.assert_allclose(omega(score, 0.5, 2.0), [1.0, math.exp(0.5), math.exp(1.0)])
    e = np.array([1.0, math.exp(0.5), math.exp(1.0)])
    q = 0.9 * e / e.sum() + 0.1 / 3
    np.testing.assert_allclose(entropic_weights(score, 0.5, 0.1, 2.0), q, rtol=1e-15)


def test_exp3p_probabilities_by_hand():
    logits = np.array([[0.0, math.log(3.0)], [5.0, 5.0]])
    np.testing.assert_allclose(exp3p_probabilities(logits, 0.2), [[0.8 * 0.25 + 0.1, 0.8 * 0.75 + 0.1],
                                                                   [0.5, 0.5]], rtol=1e-15)


def test_importance_weighted_cost_full_and_bandit_by_hand():
    cost = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    prob = np.array([[0.5, 0.25, 0.25], [0.1, 0.2, 0.7]])
    np.testing.assert_array_equal(importance_weighted_cost(cost, prob, np.array([0, 2]), "full"), cost)
    bandit = importance_weighted_cost(cost, prob, np.array([1, 0]), "bandit")
    np.testing.assert_allclose(bandit, [[0.0, 8.0, 0.0], [40.0, 0.0, 0.0]], rtol=1e-15)
    # unbiased: E_a[estimate] = cost (average over the sampled arm with its probability)
    expected = sum(prob[0, a] * importance_weighted_cost(cost, prob, np.array([a, 0]), "bandit")[0]
                   for a in range(3))
    np.testing.assert_allclose(expected, cost[0], rtol=1e-15)


def test_mirror_descent_step_by_hand_and_absent_rows_untouched():
    logits = np.array([[0.0, -1.0], [-2.0, 0.0], [0.3, -0.7]])
    estimate = np.array([[1.0, 0.0], [0.0, 4.0], [100.0, 100.0]])
    out = mirror_descent_step(logits, estimate, np.array([True, True, False]), eta=0.5, decay=0.5)
    # row 0: 0.5*(0, -1) - 0.5*(1, 0) = (-0.5, -0.5) -> recentred (0, 0)
    # row 1: 0.5*(-2, 0) - 0.5*(0, 4) = (-1, -2) -> (0, -1)
    np.testing.assert_allclose(out[:2], [[0.0, 0.0], [0.0, -1.0]], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(out[2], logits[2])  # absent: bit-for-bit, not even recentred


def test_arm_costs_and_dual_step_by_hand():
    costs = arm_costs(np.array([2.0]), 0.5, np.array([2, 4, 8]), 4)
    np.testing.assert_allclose(costs, [[2 * 4 / 2 + 0.5 * 2 / 4, 2 * 4 / 4 + 0.5 * 4 / 4, 2 * 4 / 8 + 0.5 * 8 / 4]])
    assert dual_step(1.0, 5.0, 4.0, 0.2) == pytest.approx(1.05)   # 1 + 0.2 * (5 - 4) / 4
    assert dual_step(0.01, 2.0, 4.0, 0.2) == 0.0                  # projected at 0
    assert dual_step(0.3, 4.0, 4.0, 0.2) == 0.3


def test_log_sum_exp_surrogate_lemma_4_1():
    losses = np.array([0.2, 1.5, -0.3, 1.4])
    for eta in (0.1, 1.0, 7.0, 400.0):
        value, grad = log_sum_exp_surrogate(losses, eta)
        reference = math.log(sum(math.exp(eta * x) for x in losses)) / eta if eta < 300 else None
        if reference is not None:
            assert value == pytest.approx(reference, rel=1e-13)
        assert losses.max() <= value + 1e-15 <= losses.max() + math.log(4) / eta + 2e-15
        weights = np.exp(eta * losses - (eta * losses).max())
        np.testing.assert_allclose(grad, weights / weights.sum(), rtol=1e-13)
        h = 1e-6
        fd = [(log_sum_exp_surrogate(losses + h * e, eta)[0] - log_sum_exp_surrogate(losses - h * e, eta)[0])
              / (2 * h) for e in np.eye(4)]
        np.testing.assert_allclose(fd, grad, atol=1e-6)
    with pytest.raises(ValueError, match="eta"):
        log_sum_exp_surrogate(losses, 0.0)
    with pytest.raises(ValueError, match="losses_G"):
        log_sum_exp_surrogate(np.array([1.0, NAN]), 1.0)


# ----------------------------------------------------------------------------- inside the controllers

def _feedback(bins, counts, rewards):
    ids = [f"p{i}" for i in range(len(bins))]
    rewards = np.asarray(rewards, float)
    return StepFeedback(ids, np.asarray(bins), np.asarray(counts), rewards, rewards > 0)


def test_variance_ema_in_the_allocator_by_hand():
    """Bin 0: within-prompt Bessel variance 4/3 at step 1 and 0 at step 2; beta = 0.1."""
    allocator = UniformAllocator(AllocatorConfig(num_bins=2, variance_ema=0.1))
    allocator.update(_feedback([0, 1], [4, 4], [1, 1, -1, -1, 1, 1, 1, 1]))
    # prompt 0: rewards (1, 1, -1, -1): mean 0, Bessel var 4/3; bin 1 constant: var 0
    np.testing.assert_allclose(allocator.variance_G, [4 / 3, 0.0], rtol=1e-15)
    allocator.update(_feedback([0], [4], [1, 1, 1, 1]))
    # bin 0: 0.9 * 4/3 + 0.1 * 0 = 1.2; bin 1 absent: unchanged
    np.testing.assert_allclose(allocator.variance_G, [1.2, 0.0], rtol=1e-14)


def test_prompt_gdro_debiased_ema_by_hand():
    cfg = WeighterConfig(num_bins=2, ema_beta=0.25, share_floor=0.1, eta=1.0, clip=5.0, gamma=0.0)
    weighter = PromptGDRO(cfg)
    # step 1: bin 0 has 3 prompts failing 1/2, 1/2, 1 -> mean 2/3, share 3/4, B q = 1.5 -> x = 4/9
    #         bin 1 has 1 prompt failing 0 -> x = 0 / 0.5 = 0
    weighter.update(_feedback([0, 0, 0, 1], [2, 2, 2, 2], [1, -1, -1, 1, -1, -1, 1, 1]))
    np.testing.assert_allclose(weighter.score_G, [4 / 9, 0.0], rtol=1e-14)
    # step 2: only bin 1, failing 1/2, share 1 -> B q = 2 -> x = 1/4; EMA 0.75*0 + 0.25*0.25
    weighter.update(_feedback([1], [2], [1, -1]))
    np.testing.assert_allclose(weighter.score_G, [4 / 9, 1 / 16], rtol=1e-14)
    e = np.exp([4 / 9, 1 / 16])
    np.testing.assert_allclose(weighter.bin_weights(), e / e.sum(), rtol=1e-14)


def _gdro_one_step(feedback_mode: str):
    cfg = AllocatorConfig(num_bins=3, n_min=2, n_max=4, n_bar=3, eta=0.5, gamma=0.3, dual_lr=0.2, mu_init=1.0,
                          feedback=feedback_mode, variance_ema=0.5)
    controller = RolloutGDRO(cfg, seed=5)
    bins = np.array([0, 0, 1, 1])  # bin 2 absent
    plan = controller.plan(bins)
    sampled = controller.state_dict()["sampled"]
    # prompts of bin 0: variance 4/3 each (two +1, two -1 when n = 4; any mix otherwise by plan)
    rewards = []
    for b, n in zip(bins, plan):
        rewards += ([1.0, -1.0] + [1.0] * (n - 2)) if b == 0 else [1.0] * n
    return controller, cfg, bins, plan, sampled, np.array(rewards)


@pytest.mark.parametrize("mode", ["full", "bandit"])
def test_rollout_gdro_step_by_hand_and_absent_bin_untouched(mode):
    controller, cfg, bins, plan, sampled, rewards = _gdro_one_step(mode)
    before = controller.logits_GA.copy()
    feedback = _feedback(bins, plan, rewards)
    observed = feedback.variance_by_bin(3)
    controller.update(feedback)
    # variance EMA starts at the first observation
    np.testing.assert_allclose(controller.variance_G[:2], observed[:2])
    assert math.isnan(controller.variance_G[2])
    # relative variance: unknown bin 2 takes the mean of the known ones; scale sum_b q_b v_b
    v = np.array([observed[0], observed[1], (observed[0] + observed[1]) / 2])
    q = np.array([0.5, 0.5, 0.0])
    rel = np.maximum(v / (q @ v), cfg.variance_floor)
    arms = np.array([2.0, 3.0, 4.0])
    cost = rel[:, None] * 3 / arms[None, :] + 1.0 * arms[None, :] / 3
    probs = np.full((3, 3), 1 / 3)  # logits start at 0
    if mode == "full":
        estimate = cost
    else:
        estimate = np.zeros((3, 3))
        for b in range(3):
            a = sampled[b] - 2
            estimate[b, a] = cost[b, a] / probs[b, a]
    expected = -0.5 * estimate[:2]
    expected -= expected.max(axis=1, keepdims=True)
    np.testing.assert_allclose(controller.logits_GA[:2], expected, rtol=1e-13, atol=1e-15)
    np.testing.assert_array_equal(controller.logits_GA[2], before[2])  # absent bin: untouched
    # Eq. 21 on the sampled plan's share-weighted mean
    sampled_mean = 0.5 * sampled[0] + 0.5 * sampled[1]
    assert controller.mu == pytest.approx(max(0.0, 1.0 + 0.2 * (sampled_mean - 3) / 3), rel=1e-15)


@pytest.mark.parametrize("mode", ["full", "bandit"])
def test_absent_bin_logits_untouched_over_many_steps(mode):
    rng = np.random.default_rng(0)
    controller = RolloutGDRO(AllocatorConfig(num_bins=4, feedback=mode), seed=1)
    for step in range(30):
        bins = rng.integers(0, 3, size=12)  # bin 3 never present
        plan = controller.plan(bins)
        success = rng.random(plan.sum()) < 0.5
        controller.update(_feedback(bins, plan, 2.0 * success - 1.0))
        np.testing.assert_array_equal(controller.logits_GA[3], np.zeros(controller.config.arms.size))
    assert not np.allclose(controller.logits_GA[:3], 0.0)


# ----------------------------------------------------------------------------- the per-bin (list) forms

MAYBE = st.one_of(st.just(NAN), st.floats(-1e6, 1e6))


@settings(max_examples=300, deadline=None)
@given(pairs=st.lists(st.tuples(MAYBE, MAYBE, st.floats(0.0, 1.0)), min_size=1, max_size=16),
       beta=st.floats(0.0, 1.0), floor=st.floats(1e-3, 1.0))
def test_the_list_paths_of_the_ema_and_the_debiasing_equal_the_array_rules_bit_for_bit(pairs, beta, floor):
    """ema_from_first and debiased_signal on lists of floats (the controllers' per-bin path) give the array
    statement's values bit for bit, NaN (never observed, absent) included."""
    previous, observed, share = (list(column) for column in zip(*pairs))
    assert ema_from_first(previous, observed, beta).tobytes() == \
        ema_from_first(np.array(previous), np.array(observed), beta).tobytes()
    assert debiased_signal(observed, share, floor).tobytes() == \
        debiased_signal(np.array(observed), np.array(share), floor).tobytes()


SCORES = st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=16)


@settings(max_examples=300, deadline=None)
@given(score=SCORES, eta=st.floats(0.0, 5.0), gamma=st.floats(0.0, 1.0), clip=st.floats(1e-3, 50.0))
def test_the_fast_paths_of_omega_and_entropic_weights_equal_the_plain_statement(score, eta, gamma, clip):
    """Given a list of floats, omega and entropic_weights compute in plain Python (the controller's per-step
    path); the result equals Eq. 14-15 written with numpy on the array, to rounding."""
    array = np.array(score)
    plain_omega = np.exp(eta * np.clip(array, -clip, clip))
    np.testing.assert_allclose(omega(score, eta, clip), plain_omega, rtol=1e-13)
    np.testing.assert_allclose(omega(array, eta, clip), plain_omega, rtol=1e-13)
    logits = eta * np.clip(array, -clip, clip)
    soft = np.exp(logits - logits.max())
    plain_weights = (1.0 - gamma) * soft / soft.sum() + gamma / array.size
    np.testing.assert_allclose(entropic_weights(score, eta, gamma, clip), plain_weights, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(entropic_weights(array, eta, gamma, clip), plain_weights, rtol=1e-12, atol=1e-300)


# ----------------------------------------------------------------------------- edges, by hand
# Integer and list inputs, clipping on both sides, overflow-safe softmaxes, one bin, default arguments
# and error messages (what mutation testing, scripts/mutation.sh, found unpinned).

def test_integer_and_list_inputs_give_the_float_results_of_float_arrays():
    """A state or cost given as integers is not truncated: EMA 0.5 x 1 + 0.5 x 2 = 1.5, not 1."""
    np.testing.assert_array_equal(ema_from_first([1, 2], [2, 3], 0.5), [1.5, 2.5])
    bandit = importance_weighted_cost([[1, 2], [3, 4]], [[0.5, 0.5], [0.25, 0.75]], [1, 0], "bandit")
    np.testing.assert_array_equal(bandit, [[0.0, 4.0], [12.0, 0.0]])
    full = importance_weighted_cost([[1, 2]], [[0.5, 0.5]], [0], "full")
    assert full.dtype == np.float64 and full.tolist() == [[1.0, 2.0]]
    moved = mirror_descent_step([[0, -1], [0, 0]], [[1, 0], [0, 1]], [1, 0], eta=0.5)
    np.testing.assert_array_equal(moved, [[0.0, -0.5], [0.0, 0.0]])       # 0/1 list = mask; row 2 untouched


def test_scores_are_clipped_on_both_sides():
    """Eq. 14: clip(S, -C, C) before exp: a score of -50 counts as -C."""
    np.testing.assert_allclose(omega([-50.0, 50.0], eta=0.5, clip=2.0), [math.exp(-1.0), math.exp(1.0)], rtol=1e-15)
    weights = entropic_weights([-50.0, 0.0], eta=1.0, gamma=0.0, clip=2.0)
    np.testing.assert_allclose(weights, [math.exp(-2) / (math.exp(-2) + 1), 1 / (math.exp(-2) + 1)], rtol=1e-12)


def test_softmaxes_do_not_overflow_for_large_logits():
    """Shifted by the maximum (per row for EXP3P): eta C = 1000 and rows 2,000 apart stay finite."""
    weights = entropic_weights([10.0, 9.0], eta=100.0, gamma=0.0, clip=10.0)
    np.testing.assert_allclose(weights, [1 / (1 + math.exp(-100)), math.exp(-100) / (1 + math.exp(-100))], rtol=1e-12)
    probs = exp3p_probabilities([[1000.0, 999.0], [-1000.0, -1001.0]], gamma=0.0)
    want = [1 / (1 + math.exp(-1)), math.exp(-1) / (1 + math.exp(-1))]
    np.testing.assert_allclose(probs, [want, want], rtol=1e-12)


def test_log_sum_exp_surrogate_of_one_bin_and_of_a_matrix():
    value, grad = log_sum_exp_surrogate(np.array([0.3]), eta=2.0)
    assert value == pytest.approx(0.3) and grad.tolist() == [1.0]
    with pytest.raises(ValueError, match="losses_G must be a non-empty 1-D array"):
        log_sum_exp_surrogate(np.zeros((2, 2)), eta=1.0)


def test_mirror_descent_default_decay_is_zero():
    logits, cost = np.array([[0.0, -1.0]]), np.array([[1.0, 0.5]])
    np.testing.assert_array_equal(mirror_descent_step(logits, cost, np.array([True]), eta=1.0),
                                  mirror_descent_step(logits, cost, np.array([True]), eta=1.0, decay=0.0))
    np.testing.assert_array_equal(mirror_descent_step(logits, cost, np.array([True]), eta=1.0), [[0.0, -0.5]])


def test_unknown_feedback_is_named_in_the_error():
    with pytest.raises(ValueError, match="feedback='partial' is invalid: must be 'full' or 'bandit'"):
        importance_weighted_cost(np.zeros((1, 2)), np.full((1, 2), 0.5), np.array([0]), "partial")


def test_no_bins_and_extra_axes_take_numpys_reductions() -> None:
    """A step with no bins gives an empty (0, A) result, never an error; (G, A, K) logits are a
    softmax over the arms (axis 1) for each trailing index: the fallback path of both rules."""
    empty = exp3p_probabilities(np.zeros((0, 4)), gamma=0.1)
    assert empty.shape == (0, 4)
    moved = mirror_descent_step(np.zeros((0, 4)), np.zeros((0, 4)), np.ones(0, bool), eta=0.5)
    assert moved.shape == (0, 4)
    logits = np.random.default_rng(3).normal(size=(2, 3, 4))
    soft = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    assert exp3p_probabilities(logits, gamma=0.1) == pytest.approx(0.9 * soft + 0.1 / 3, abs=1e-15)


def test_full_decay_forgets_the_logits() -> None:
    logits = np.array([[0.0, -3.0, -1.0], [-2.0, 0.0, -5.0]])
    estimate = np.array([[1.0, 0.0, 2.0], [0.5, 1.5, 0.0]])
    expected = -0.5 * estimate - (-0.5 * estimate).max(axis=1, keepdims=True)
    assert mirror_descent_step(logits, estimate, np.ones(2, bool), eta=0.5, decay=1.0) == pytest.approx(expected)


def test_softmaxes_stay_finite_at_logits_that_overflow_exp() -> None:
    """The max is subtracted before exp: logits near 800 (exp overflows past ~709) give the softmax
    of their differences, in the array forms' fallback path and in the list form alike."""
    logits = np.array([[[800.0], [799.0]], [[-5.0], [-5.0]]])  # (G, A, 1): the fallback path
    expected = np.array([1.0, np.exp(-1.0)]) / (1.0 + np.exp(-1.0))
    assert exp3p_probabilities(logits, gamma=0.0)[0, :, 0] == pytest.approx(expected, rel=1e-12)
    weights = entropic_weights([800.0, 799.0], eta=1.0, gamma=0.0, clip=1000.0)
    assert weights == pytest.approx(expected, rel=1e-12)
