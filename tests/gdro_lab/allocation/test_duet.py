"""DUET's counts against hand-worked cases and an independent bisection + largest remainder; the abort rule
and its importance weights by hand, and unbiased in expectation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gdro_lab import ConfigError
from gdro_lab.allocation.duet import KEEP_PROB, duet_plan, marker_gated_abort, min_scored, scored_rows


def reference(score, total, n_min, n_max):
    """clip(lam s) summing to total by bisection on lam, then floor + the largest fractions (ties: lower index)."""
    pos = score > 0
    relaxed = np.full(score.size, total / score.size)
    if pos.any():  # the positive scores take what they can, up to all at n_max; zero scores share the rest
        target = min(total - n_min * (~pos).sum(), n_max * pos.sum())
        lo, hi = 0.0, 1.0
        while np.clip(hi * score[pos], n_min, n_max).sum() < target:
            hi *= 2
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if np.clip(mid * score[pos], n_min, n_max).sum() < target else (lo, mid)
        relaxed[pos] = np.clip(hi * score[pos], n_min, n_max)
        relaxed[~pos] = (total - relaxed[pos].sum()) / max((~pos).sum(), 1)
    plan = np.floor(relaxed + 1e-9).astype(int)
    order = sorted(range(score.size), key=lambda i: (-(relaxed[i] - plan[i]), i))
    for i in order[: total - plan.sum()]:
        plan[i] += 1
    return plan, relaxed


def test_counts_by_hand():
    # scores (1, 2, 3, 0), 16 rollouts in [2, 8]: the zero score at n_min, 14 shared 1 : 2 : 3 = 7/3, 14/3, 7;
    # floors (2, 4, 7, 2) sum to 15, the one left goes to the largest fraction (14/3)
    plan, relaxed = duet_plan(np.array([1.0, 2.0, 3.0, 0.0]), 16, 2, 8)
    np.testing.assert_allclose(relaxed, [7 / 3, 14 / 3, 7.0, 2.0])
    np.testing.assert_array_equal(plan, [2, 5, 7, 2])
    # (1, 1, 10), 12 in [2, 6]: 10 lam clipped at 6, the other two share 6 equally
    np.testing.assert_array_equal(duet_plan(np.array([1.0, 1.0, 10.0]), 12, 2, 6)[0], [3, 3, 6])
    # equal scores (or none): n_bar each; a higher score never gets fewer rollouts
    np.testing.assert_array_equal(duet_plan(np.full(5, 0.2), 20, 2, 12)[0], [4] * 5)
    np.testing.assert_array_equal(duet_plan(np.zeros(3), 12, 2, 12)[0], [4] * 3)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), size=st.integers(1, 40), n_bar=st.integers(2, 12), n_max=st.integers(2, 16))
def test_exact_budget_in_the_box_and_the_reference(seed, size, n_bar, n_max):
    rng = np.random.default_rng(seed)
    n_max = max(n_max, n_bar)
    score = rng.uniform(0, 0.25, size) * (rng.random(size) < 0.8)
    plan, relaxed = duet_plan(score, size * n_bar, 2, n_max)
    assert plan.dtype == np.int64 and plan.sum() == size * n_bar
    assert plan.min() >= 2 and plan.max() <= n_max and np.all(np.abs(plan - relaxed) < 1)
    want, want_relaxed = reference(score, size * n_bar, 2, n_max)
    np.testing.assert_allclose(relaxed, want_relaxed, atol=1e-9)
    np.testing.assert_array_equal(plan, want)
    order = np.argsort(score, kind="stable")
    assert np.all(np.diff(relaxed[order]) >= -1e-9)  # more informative, at least as many rollouts


def test_abort_rule_by_hand():
    # horizon 10, grace 4: the check is at 14 tokens
    marker = [5, 14, -1, -1, -1, 30, 3, -1]
    length = [50, 60, 8, 100, 100, 40, 6, 100]
    u = [0.5, 0.5, 0.5, 0.01, 0.5, 0.9, 0.0, KEEP_PROB]
    tokens, weight = marker_gated_abort(marker, length, 10, 4, u)
    # marker at 5: stop 4 tokens after it; at 14 (on the check): 18; no marker but EOS at 8: untouched;
    # no marker at 14, u < 0.05: to EOS with weight 20; u >= 0.05: aborted at 14; a marker after the check
    # is not seen (aborted at 14); marker at 3 with EOS at 6: EOS first; u = keep_prob: aborted (P = keep_prob)
    np.testing.assert_array_equal(tokens, [9, 18, 8, 100, 14, 14, 6, 14])
    np.testing.assert_allclose(weight, [1, 1, 1, 1 / KEEP_PROB, 0, 0, 1, 0])
    assert KEEP_PROB == 0.05


def test_abort_weights_are_unbiased_for_every_rollout():
    rng = np.random.default_rng(0)
    size = 50
    length = rng.integers(1, 400, size)
    marker = np.where(rng.random(size) < 0.5, rng.integers(0, 400, size) % length, -1)
    grid = (np.arange(1000) + 0.5) / 1000  # E_u[weight] on a midpoint grid: exact for keep_prob in 1/1000s
    for q in (0.01, 0.05, 0.2, 1.0):
        mean = np.mean([marker_gated_abort(marker, length, 100, 20, np.full(size, v), q)[1] for v in grid], axis=0)
        np.testing.assert_allclose(mean, 1.0)


@pytest.mark.parametrize("args,message", [
    (([5], [4], 10, 4, [0.5]), "marker after"),
    (([5, 1], [9], 10, 4, [0.5]), "one per rollout"),
    (([5], [9], -1, 4, [0.5]), "horizon"),
    (([5], [9], 10, 4, [0.5], 0.0), "keep_prob"),
    (([5], [0], 10, 4, [0.5]), "length_R"),
])
def test_bad_abort_inputs_are_one_line_errors(args, message):
    with pytest.raises(ConfigError, match=message) as info:
        marker_gated_abort(*args)
    assert "\n" not in str(info.value)


def test_bad_plan_inputs_are_one_line_errors():
    for args, message in [((np.array([-0.1, 1.0]), 8, 2, 6), "score_P"), ((np.ones(2), 30, 2, 6), "total")]:
        with pytest.raises(ConfigError, match=message) as info:
            duet_plan(*args)
        assert "\n" not in str(info.value)


@pytest.mark.parametrize("k,need", [(None, 2), (1, 2), (2, 2), (3, 3), (5, 5)])
def test_early_stopping_keeps_a_prompt_with_max_2_k_scored_rollouts(k, need):
    """A prompt enters an early-stopped step with max(2, k) scored rollouts (a GRPO group needs two, pass@k needs
    k; no k: 2): with scored counts 1..5, exactly those with at least that many are seen."""
    config = type("Classifier", (), {} if k is None else {"k": k})()
    assert min_scored(config) == need
    counts = np.full(5, 6)
    weights = np.concatenate([np.r_[np.ones(m), np.zeros(6 - m)] for m in range(1, 6)])  # prompt i: i + 1 scored
    seen, _, scored = scored_rows(counts, weights, min_scored(config))
    assert seen.tolist() == [m >= need for m in range(1, 6)] and scored.tolist() == list(range(need, 6))
