"""The simulator's per-prompt oracles by value: each plan spends exactly P n_bar and is the brute-force
minimiser of sum_i v_i / n_i on the variances it is meant to see. A plan off the budget would otherwise be
caught only by the step's budget check raising inside a run (a crash, not a named value)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gdro_lab.controllers.feedback import StepFeedback
from gdro_lab.controllers.peer_allocators import BoxConfig
from simulators.oracle import PromptOracleAllocator, PromptStaleAllocator

BOX = BoxConfig(num_bins=2, n_min=2, n_max=8, n_bar=4)


def brute_force_best(variance_P: np.ndarray) -> float:
    """min sum_i v_i / n_i over every integer plan with sum P n_bar in [n_min, n_max]."""
    total = variance_P.size * BOX.n_bar
    return min(float(np.sum(variance_P / np.array(n))) for n in
               itertools.product(range(BOX.n_min, BOX.n_max + 1), repeat=variance_P.size) if sum(n) == total)


@pytest.mark.parametrize("seed", range(3))
def test_the_prompt_oracle_spends_the_budget_as_brute_force_would(seed):
    p = np.random.default_rng(seed).uniform(0.02, 0.98, 4)
    allocator = PromptOracleAllocator(BOX)
    allocator.observe_truth(p)
    plan = allocator.plan(np.zeros(4, np.int64), [f"q{i}" for i in range(4)])
    assert plan.dtype == np.int64 and int(plan.sum()) == 4 * BOX.n_bar
    assert plan.min() >= BOX.n_min and plan.max() <= BOX.n_max
    assert float(np.sum(4 * p * (1 - p) / plan)) == pytest.approx(brute_force_best(4 * p * (1 - p)), rel=1e-12)


def test_the_stale_oracle_plans_the_previous_visits_truth_within_the_budget():
    """First visit: n_bar each (no previous p); second visit: the oracle on the p of the first visit, not
    the p handed over now, spending exactly P n_bar."""
    ids = ["a", "b", "c", "d"]
    first, now = np.array([0.5, 0.05, 0.9, 0.3]), np.array([0.1, 0.6, 0.5, 0.95])
    allocator = PromptStaleAllocator(BOX)
    allocator.observe_truth(first)
    plan = allocator.plan(np.zeros(4, np.int64), ids)
    assert plan.tolist() == [BOX.n_bar] * 4
    successes = np.array([1, 0, 1, 0] * 4, bool)
    allocator.update(StepFeedback(ids, np.zeros(4, np.int64), plan, 2.0 * successes - 1, successes))
    allocator.observe_truth(now)
    plan = allocator.plan(np.zeros(4, np.int64), ids)
    v = 4 * first * (1 - first)
    assert int(plan.sum()) == 4 * BOX.n_bar and plan.min() >= BOX.n_min and plan.max() <= BOX.n_max
    assert float(np.sum(v / plan)) == pytest.approx(brute_force_best(v), rel=1e-12)
    assert plan[0] > plan[1]       # p = 0.5 before (v = 1) gets more than p = 0.05 (v = 0.19), whatever p is now
