"""Knapsack-RL's value, cost and plan against hand-computed values and a brute-force DP."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gdro_lab.allocation.knapsack import _knapsack_extra, knapsack_cost, knapsack_plan, knapsack_value, spread


@pytest.mark.parametrize("p,n,expected", [
    (0.5, 2, 0.0625),                 # (1 - 1/4 - 1/4) * 1/2 * 1/4
    (0.25, 4, 0.6796875 * 0.140625),  # (1 - 1/256 - 81/256) * 1/4 * 9/16
    (0.1, 8, (1 - 1e-8 - 0.43046721) * 0.1 * 0.81),
    (0.0, 5, 0.0), (1.0, 5, 0.0),
    (0.9, 1, 0.0),                    # one rollout never has a non-zero gradient
])
def test_value_by_hand(p, n, expected):
    assert float(knapsack_value(p, n)) == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_cost_by_hand():
    assert float(knapsack_cost(0.5, 0.9)) == pytest.approx(np.log(0.1) / np.log(0.5))   # 3.32 rollouts
    assert float(knapsack_cost(0.2, 0.9)) == pytest.approx(np.log(0.1) / np.log(0.8))   # 10.3
    assert np.isinf(knapsack_cost(0.0)) and np.isinf(knapsack_cost(1.0))


def dp_reference(p_E, budget, n_min, room):
    """The released code's DP (items x budget, k in 1..room or nothing), written as a plain loop.

    Returns (best value over every w <= budget reachable, the largest such w)."""
    items = len(p_E)
    dp = np.full((items + 1, budget + 1), -np.inf)
    dp[0, 0] = 0.0
    for i in range(1, items + 1):
        for w in range(budget + 1):
            dp[i, w] = dp[i - 1, w]
            for k in range(1, min(room, w) + 1):
                if dp[i - 1, w - k] > -np.inf:
                    dp[i, w] = max(dp[i, w], dp[i - 1, w - k] + float(knapsack_value(p_E[i - 1], n_min + k)))
    w = budget
    while w > 0 and dp[items, w] == -np.inf:
        w -= 1
    return dp[items, w], w


def credited(p_E, n_E, n_min):
    return sum(float(knapsack_value(p, n)) if n > n_min else 0.0 for p, n in zip(p_E, n_E))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), items=st.integers(1, 5), room=st.integers(1, 6), budget=st.integers(0, 20))
def test_greedy_knapsack_matches_the_codes_dp(seed, items, room, budget):
    p = np.random.default_rng(seed).uniform(0.02, 0.98, items)
    best, used = dp_reference(p, budget, 2, room)
    n = _knapsack_extra(p, min(budget, items * room), 2, room)
    assert n.sum() - 2 * items == used
    assert credited(p, n, 2) == pytest.approx(best, rel=1e-12, abs=1e-15)


def test_plan_by_hand():
    # invalid -> n_default 4; p = 0 and p = 1 -> n_min 2; effective p = 0.5 gets the knapsack
    p = np.array([0.0, 1.0, 0.5, 0.3, 0.5])
    valid = np.array([True, True, True, True, False])
    n = knapsack_plan(p, valid, 20, 2, 12, 4, alpha=0.9)
    assert n.sum() == 20 and n[4] == 4 and n[1] == 2
    # budget left after the base 2+2+2+2+4 = 12 is 8; costs int(3.32) + int(6.46) = 9 > 8: no fallback,
    # the 8 extra go to the two effective prompts by the knapsack, none to the p = 0 prompt
    assert n[0] == 2 and n[2] + n[3] == 12
    dp_best, _ = dp_reference(p[2:4], 8, 2, 10)
    assert credited(p[2:4], n[2:4], 2) == pytest.approx(dp_best)


def test_fallback_gives_the_unusable_budget_to_never_solved_prompts():
    # one easy effective prompt (cost int(log 0.1 / log 0.9) = 21 -> capped at n_max 12) and 3 p = 0
    p = np.array([0.1, 0.0, 0.0, 0.0])
    n = knapsack_plan(p, np.ones(4, bool), 40, 2, 12, 10, alpha=0.9)
    # base 2 each (8), left 32 > cost 12: the surplus 20 goes to the three p = 0 prompts (+7, +7, +6);
    # the knapsack fills the effective prompt to n_max (10 of its 12), the last 2 go to prompts with room
    np.testing.assert_array_equal(n, [12, 10, 10, 8])
    no_fallback = knapsack_plan(p, np.ones(4, bool), 40, 2, 12, 10, fallback=False)
    assert no_fallback[0] == 12 and no_fallback.sum() == 40  # the rest is spread, never above n_max


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 10_000), size=st.integers(1, 40), n_bar=st.integers(2, 8), n_max=st.integers(8, 14))
def test_plan_is_always_exact_and_boxed(seed, size, n_bar, n_max):
    rng = np.random.default_rng(seed)
    p = rng.choice([0.0, 1.0, 0.5], size) * (rng.random(size) < 0.5) + rng.random(size) * (rng.random(size) < 0.5)
    p = np.clip(p, 0, 1)
    valid = rng.random(size) < 0.8
    n = knapsack_plan(p, valid, size * n_bar, 2, n_max, n_bar)
    assert n.sum() == size * n_bar and n.min() >= 2 and n.max() <= n_max


def test_value_table_equals_the_value():
    from gdro_lab.allocation.knapsack import _value_table
    p = np.array([0.0, 0.03, 0.5, 0.97, 1.0])
    np.testing.assert_allclose(_value_table(p, 2, 10), knapsack_value(p[:, None], np.arange(2, 13)[None, :]),
                               rtol=1e-12, atol=1e-15)


def test_spread_respects_the_cap():
    n = np.array([2, 2, 11])
    assert spread(n, np.array([0, 1, 2]), 25, 12) == 25 - 21
    np.testing.assert_array_equal(n, [12, 12, 12])
