"""Edges of the update rules that mutation testing (scripts/mutation.sh) found unpinned: integer
and list inputs, clipping on both sides, overflow-safe softmaxes, one bin, default arguments and
error messages. Each expected value is written out by hand or by a plain formula."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gdro_lab.functional.update_rules import (ema_from_first, entropic_weights, exp3p_probabilities,
                                              importance_weighted_cost, log_sum_exp_surrogate, mirror_descent_step,
                                              omega)


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
