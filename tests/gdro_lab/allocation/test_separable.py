"""separable_plan against brute force on small concave instances."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gdro_lab.allocation.separable import plan_value, separable_plan


def brute_force(values_PA: np.ndarray, total: int, n_min: int) -> float:
    """Best sum of values over every plan with the exact total (enumeration)."""
    num_prompts, num_arms = values_PA.shape
    best = -np.inf
    for arms in itertools.product(range(num_arms), repeat=num_prompts):
        if sum(arms) + num_prompts * n_min == total:
            best = max(best, sum(values_PA[i, a] for i, a in enumerate(arms)))
    return best


def concave_rows(rng: np.random.Generator, num_prompts: int, num_arms: int) -> np.ndarray:
    """Random concave rows: cumulative sums of sorted-decreasing increments (some negative)."""
    steps = -np.sort(-rng.normal(size=(num_prompts, num_arms - 1)), axis=1)
    return np.concatenate([rng.normal(size=(num_prompts, 1)), steps], axis=1).cumsum(axis=1)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), num_prompts=st.integers(1, 4), num_arms=st.integers(1, 5),
       n_min=st.integers(0, 3), fill=st.floats(0, 1))
def test_greedy_matches_brute_force(seed, num_prompts, num_arms, n_min, fill):
    values = concave_rows(np.random.default_rng(seed), num_prompts, num_arms)
    total = num_prompts * n_min + int(round(fill * num_prompts * (num_arms - 1)))
    n_P = separable_plan(np.diff(values, axis=1), total, n_min)
    assert n_P.sum() == total and n_P.min() >= n_min and n_P.max() <= n_min + num_arms - 1
    assert plan_value(values, n_P, n_min) == pytest.approx(brute_force(values, total, n_min), abs=1e-9)


def test_ties_go_to_the_lower_increment_then_the_earlier_prompt():
    gains = np.ones((3, 4))  # every increment is worth the same
    np.testing.assert_array_equal(separable_plan(gains, 3 * 2 + 4, 2), [4, 3, 3])


def test_total_outside_the_box_is_a_one_line_error():
    with pytest.raises(ValueError, match="total"):
        separable_plan(np.zeros((2, 3)), 100, 2)
