"""VIP's convex program: the relaxed solution against scipy, the integer one against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from gdro_lab.allocation.separable import separable_plan
from gdro_lab.allocation.vip import beta_expected_variance, convex_plan, round_relaxed, sqrt_law_relaxed


def objective(w, n, offset):
    return float(np.sum(w / (np.asarray(n, float) - offset)))


def scipy_relaxed(w, total, n_min, n_max, offset):
    start = np.full(w.size, total / w.size)
    result = minimize(lambda n: objective(w, n, offset), start, jac=lambda n: -w / (n - offset) ** 2,
                      bounds=[(n_min, n_max)] * w.size, method="SLSQP",
                      constraints=[{"type": "eq", "fun": lambda n: n.sum() - total, "jac": lambda n: np.ones_like(n)}],
                      options={"ftol": 1e-14, "maxiter": 500})
    assert result.success, result.message
    return result.x


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), size=st.integers(2, 30), n_bar=st.integers(2, 10), offset=st.sampled_from([0.0, 1.0]))
def test_relaxed_solution_matches_scipy(seed, size, n_bar, offset):
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.001, 0.25, size) * (rng.random(size) < 0.9)  # some zero weights
    total = size * n_bar
    ours = sqrt_law_relaxed(w, total, 2, 12, offset)
    assert ours.sum() == pytest.approx(total) and ours.min() >= 2 - 1e-12 and ours.max() <= 12 + 1e-12
    reference = scipy_relaxed(w, total, 2, 12, offset)
    assert objective(w, ours, offset) <= objective(w, reference, offset) * (1 + 1e-7) + 1e-12


def brute_force(w, total, n_min, n_max, offset):
    best, plan = np.inf, None
    for n in itertools.product(range(n_min, n_max + 1), repeat=w.size):
        if sum(n) == total and objective(w, n, offset) < best - 1e-15:
            best, plan = objective(w, n, offset), n
    return best, np.array(plan)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), size=st.integers(1, 4), fill=st.floats(0, 1), offset=st.sampled_from([0.0, 1.0]))
def test_integer_plan_matches_brute_force_and_lies_next_to_the_relaxed_one(seed, size, fill, offset):
    w = np.random.default_rng(seed).uniform(0.0, 0.25, size)
    total = 2 * size + int(round(fill * size * 5))
    n, relaxed = convex_plan(w, total, 2, 7, offset)
    best, _ = brute_force(w, total, 2, 7, offset)
    assert n.sum() == total
    assert objective(w, n, offset) == pytest.approx(best, rel=1e-12, abs=1e-15)
    assert np.all(n >= np.floor(relaxed - 1e-9)) and np.all(n <= np.ceil(relaxed + 1e-9))


def test_integer_plan_equals_the_greedy_on_all_arms():
    rng = np.random.default_rng(4)
    w = rng.uniform(0, 0.25, 256)
    arms = np.arange(2, 13, dtype=float)
    values = -w[:, None] / (arms - 1.0)
    greedy = separable_plan(np.diff(values, axis=1), 1024, 2)
    ours = round_relaxed(sqrt_law_relaxed(w, 1024, 2, 12, 1.0), w, 1024, 2, 12, 1.0)
    assert objective(w, ours, 1.0) == pytest.approx(objective(w, greedy, 1.0), rel=1e-12)


def test_square_root_law_by_hand():
    # w = (1, 4, 0): unboxed n ∝ sqrt(w) = 1 : 2 with the zero-weight prompt at n_min = 2
    n = sqrt_law_relaxed(np.array([1.0, 4.0, 0.0]), 11.0, 2.0, 100.0, 0.0)
    np.testing.assert_allclose(n, [3.0, 6.0, 2.0])
    assert beta_expected_variance(1.0, 1.0) == pytest.approx(1 / 6)   # E[p(1-p)] under uniform p
    assert beta_expected_variance(2.0, 6.0) == pytest.approx(12 / (8 * 9))
