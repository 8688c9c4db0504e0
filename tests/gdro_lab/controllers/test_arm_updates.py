"""Rollout-GDRO's arm arithmetic: inverse-CDF sampling, the relative variance, the shared exponentials."""

from __future__ import annotations

import numpy as np
import pytest

from gdro_lab.controllers.arm_updates import relative_variance, sample_arms
from gdro_lab.functional.update_rules import exp3p_probabilities

ARMS = np.arange(2, 13)


def _state(seed: int, spiky: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    rng = np.random.default_rng(seed)
    logits = -np.abs(rng.normal(0.0, 300.0 if spiky else 1.0, size=(10, ARMS.size)))
    logits -= logits.max(axis=1, keepdims=True)
    share = rng.dirichlet(np.ones(10))
    variance = rng.uniform(0.0, 1.0, size=10)
    return logits, share, variance, float(rng.uniform(0.2, 3.0))


@pytest.mark.parametrize("seed", range(6))
def test_sample_arms_is_the_inverse_cdf_count(seed: int) -> None:
    logits, _, _, _ = _state(seed, spiky=seed % 2 == 0)
    probs = exp3p_probabilities(logits, 0.01)
    draws = np.random.default_rng(seed).random(10)
    draws[0] = probs[0].cumsum()[3]  # a draw exactly on a cumulative boundary
    expected = ARMS[np.minimum((probs.cumsum(axis=1) < draws[:, None]).sum(axis=1), ARMS.size - 1)]
    assert sample_arms(probs, draws, 2).tolist() == expected.tolist()


def test_relative_variance_unknown_bins_and_no_share() -> None:
    variance = np.array([np.nan, 0.2, 0.4, np.nan])
    share = np.array([0.25, 0.25, 0.5, 0.0])
    fill = np.array([0.2, 0.4]).mean()  # unknown bins take the mean of the known ones
    filled = np.array([fill, 0.2, 0.4, fill])
    expected = np.maximum(filled / float(np.dot(share, filled)), 1e-3)
    assert relative_variance(variance, share, 1e-3).tolist() == expected.tolist()
    assert relative_variance(np.full(3, np.nan), np.ones(3) / 3, 1e-3).tolist() == [1.0] * 3
    no_share = relative_variance(np.array([0.1, 0.3]), np.zeros(2), 1e-3)
    assert no_share.tolist() == np.maximum(np.array([0.1, 0.3]) / 0.2, 1e-3).tolist()


@pytest.mark.parametrize("shape", [(1, 1), (10, 11), (3, 40), (7, 2)])
def test_row_reductions_equal_a_plain_loop(shape: tuple[int, int]) -> None:
    """rows.row_max and rows.row_min are the row maximum and minimum bit for bit; rows.row_sum is each row's
    sum (a Python loop: exactly for rows of up to 8, where numpy adds in order; to rounding beyond, where numpy
    adds pairwise)."""
    from gdro_lab._rows import row_max, row_min, row_sum

    values = np.random.default_rng(sum(shape)).standard_normal(shape) * 10.0 ** np.arange(shape[1])
    assert row_max(values).shape == (shape[0], 1)
    assert row_max(values).ravel().tolist() == [max(row) for row in values.tolist()]
    with_inf = np.where(values > 1.0, np.inf, values)  # the planner's Bellman-Ford layers hold inf (no path)
    assert row_min(with_inf).tolist() == [min(row) for row in with_inf.tolist()]
    expected = []
    for row in values.tolist():
        total = 0.0
        for value in row:
            total += value
        expected.append(total)
    np.testing.assert_allclose(row_sum(values), expected, rtol=1e-13, atol=0)
    if shape[1] <= 8:
        assert row_sum(values).tolist() == expected
    assert row_max(values[:, ::-1]).ravel().tolist() == [max(row) for row in values.tolist()]  # non-contiguous


@pytest.mark.parametrize("seed", range(4))
def test_row_softmax_is_the_plain_statement(seed: int) -> None:
    """update_rules.row_softmax (the sampling softmax and the exact planner's arm scores) against exp(L_b) / sum and
    L_b - log sum exp L_b by numpy's logaddexp."""
    from gdro_lab.functional.update_rules import row_softmax

    logits, _, _, _ = _state(seed, spiky=seed % 2 == 0)
    soft, log_soft = row_softmax(logits)
    np.testing.assert_allclose(log_soft, logits - np.logaddexp.reduce(logits, axis=1, keepdims=True),
                               rtol=0, atol=1e-12)
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    np.testing.assert_allclose(soft, shifted / shifted.sum(axis=1, keepdims=True), rtol=1e-12, atol=1e-300)
