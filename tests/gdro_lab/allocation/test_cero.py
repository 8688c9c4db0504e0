"""CERO's per-step math against brute force and hand-computed steps (gdro_lab.allocation.cero)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gdro_lab.allocation.cero import cero_dual_step, cero_plan, dual_target, lagrangian_choice


def best_value(theta: np.ndarray, total: int, n_min: int, n_max: int) -> float:
    """max sum_i theta_i n_i over every integer plan in the box with the exact total (enumeration)."""
    plans = (n for n in itertools.product(range(n_min, n_max + 1), repeat=theta.size) if sum(n) == total)
    return max(float(theta @ np.array(n)) for n in plans)


@pytest.mark.parametrize("seed", range(40))
def test_lagrangian_choice_is_the_integer_argmax_per_prompt(seed):
    rng = np.random.default_rng(seed)
    n_min = int(rng.integers(1, 4))
    n_max = n_min + int(rng.integers(0, 6))
    theta = rng.choice([0.0, 0.05, 0.1, 0.2], size=6)
    price = float(rng.choice([0.0, 0.05, 0.1, 0.3]))
    arms = np.arange(n_min, n_max + 1)
    expected = [arms[np.argmax((t - price) * arms)] for t in theta]  # argmax: the first, n_min on a tie
    np.testing.assert_array_equal(lagrangian_choice(theta, price, n_min, n_max), expected)


@pytest.mark.parametrize("seed", range(60))
def test_cero_plan_is_the_brute_force_optimum_and_a_lagrangian_maximiser(seed):
    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, 5))
    n_min, n_max = int(rng.integers(1, 3)), int(rng.integers(3, 7))
    theta = rng.choice([0.0, 0.02, 0.05, 0.05, 0.1, 0.2], size=size) + (seed % 2) * rng.random(size) * 1e-3
    total = int(rng.integers(size * n_min, size * n_max + 1))
    plan = cero_plan(theta, total, n_min, n_max)
    assert plan.sum() == total and plan.min() >= n_min and plan.max() <= n_max
    assert float(theta @ plan) == pytest.approx(best_value(theta, total, n_min, n_max), abs=1e-12)
    # KKT at the step price: no prompt above n_min has a lower theta than a prompt below n_max
    above, below = theta[plan > n_min], theta[plan < n_max]
    if above.size and below.size:
        assert above.min() >= below.max()


def test_equal_duals_share_the_budget_evenly():
    np.testing.assert_array_equal(cero_plan(np.full(4, 0.1), 4 * 4, 2, 12), [4, 4, 4, 4])
    np.testing.assert_array_equal(cero_plan(np.array([0.3, 0.1, 0.1, 0.1]), 4 * 4, 2, 12), [10, 2, 2, 2])
    np.testing.assert_array_equal(cero_plan(np.array([0.3, 0.1, 0.1]), 12 + 5, 2, 12), [12, 3, 2])


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 10_000), size=st.integers(1, 40), n_min=st.integers(1, 4), width=st.integers(0, 12),
       fill=st.floats(0, 1))
def test_exact_budget_and_box_on_random_instances(seed, size, n_min, width, fill):
    rng = np.random.default_rng(seed)
    theta = np.where(rng.random(size) < 0.3, 0.0, rng.random(size) * 0.25)
    total = size * n_min + int(round(fill * size * width))
    plan = cero_plan(theta, total, n_min, n_min + width)
    assert plan.dtype == np.int64 and plan.sum() == total
    assert plan.min() >= n_min and plan.max() <= n_min + width


@pytest.mark.parametrize("v,theta", [(0.2, 0.05), (0.25, 0.2), (0.1, 0.5), (0.2, 1e-6), (0.15, 0.0)])
def test_dual_target_maximises_the_saturating_utility_minus_the_price(v, theta):
    """N*(theta) / K against a grid search of U(N) - theta N, U(N) = v c (1 - e^(-N/c)), c = s K,
    N in [K n_min, K n_max]."""
    s, epochs, n_min, n_max = 3.0, 5, 2, 12
    c = s * epochs
    grid = np.linspace(epochs * n_min, epochs * n_max, 200_001)
    best = grid[np.argmax(v * c * (1 - np.exp(-grid / c)) - theta * grid)]
    assert dual_target(np.array([v]), np.array([theta]), s, n_min, n_max)[0] == pytest.approx(best / epochs, abs=1e-3)


def test_cero_dual_step_by_hand():
    """theta <- max(theta - lr (n - clip(s ln(v / theta), n_min, n_max)), 0); s = 4: 4 ln 4 = 5.545177444479562."""
    theta, v = np.array([0.05, 0.05, 0.05, 0.3]), np.array([0.2, 0.2, 0.2, 0.2])
    n = np.array([2, 12, 5, 12])
    out = cero_dual_step(theta, n, v, np.array([0.01, 0.01, 0.002, 0.01]), 4.0, 2, 12)
    # 0.05 - 0.01 (2 - 5.5452) | 0.05 - 0.01 (12 - 5.5452) < 0 -> 0 | 0.05 - 0.002 (5 - 5.5452) | target at n_min
    np.testing.assert_allclose(out, [0.08545177444479562, 0.0, 0.05109035488895912, 0.3 - 0.01 * 10], rtol=1e-12)


def test_budget_step_by_hand():
    """CERO's budget dual is Eq. 21's projected relative step (one form: update_rules.dual_step)."""
    from gdro_lab.functional.update_rules import dual_step as budget_step
    assert budget_step(0.05, 300, 256, 0.01) == pytest.approx(0.05 + 0.01 * 44 / 256)
    assert budget_step(0.05, 200, 256, 0.01) == pytest.approx(0.05 - 0.01 * 56 / 256)
    assert budget_step(0.001, 100, 256, 0.1) == 0.0  # projected onto lambda >= 0
    assert math.isclose(budget_step(0.07, 256, 256, 1.0), 0.07)
