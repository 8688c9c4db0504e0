"""Knapsack-style allocator: greedy plan against brute force; budget and bounds."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gdro_lab import StepFeedback
from simulators.knapsack import KnapsackAllocator, knapsack_plan, knapsack_value
from gdro_lab.rollout_gdro import AllocatorConfig


def brute_force(p: np.ndarray, total: int, n_min: int, n_max: int) -> float:
    best = -np.inf
    for combo in itertools.product(range(n_min, n_max + 1), repeat=p.size):
        if sum(combo) == total:
            best = max(best, float(knapsack_value(p, np.array(combo)).sum()))
    return best


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=4), st.integers(2, 4), st.data())
def test_greedy_is_optimal_and_exact(probs: list[float], n_min: int, data: st.DataObject) -> None:
    p = np.array(probs)
    n_max = n_min + 4
    total = data.draw(st.integers(p.size * n_min, p.size * n_max))
    plan = knapsack_plan(p, total, n_min, n_max)
    assert plan.sum() == total and plan.min() >= n_min and plan.max() <= n_max
    assert knapsack_value(p, plan).sum() >= brute_force(p, total, n_min, n_max) - 1e-12


def test_allocator_interface_and_state() -> None:
    alloc = KnapsackAllocator(AllocatorConfig(num_bins=3), seed=0)
    bins = np.array([0, 0, 1, 2, -1, 1])
    plan = alloc.plan(bins)
    assert plan.sum() == 6 * 4
    counts = np.array([2, 2, 6, 6, 4, 4])
    rewards = np.where(np.arange(24) % 3 == 0, 1.0, -1.0)
    fb = StepFeedback([f"p{i}" for i in range(6)], bins, counts, rewards, rewards > 0)
    alloc.update(fb)
    state = alloc.state_dict()
    again = KnapsackAllocator(AllocatorConfig(num_bins=3), seed=5)
    again.load_state_dict(state)
    np.testing.assert_array_equal(again.plan(bins), alloc.plan(bins))
    # A bin of unsolved prompts (p = 0) has no gradient at any n: it gets n_min.
    alloc.success_G[:] = [0.0, 0.5, 1.0]
    plan = alloc.plan(np.array([0, 1, 2, 1]))
    assert plan[0] == 2 and plan[2] == 2 and plan[1] > 4
