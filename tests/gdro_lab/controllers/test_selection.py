"""Prompt selectors: GRESO's skip rule by hand, DAPO's filter, fill_batch and the compute counts."""

from __future__ import annotations

import numpy as np
import pytest

from gdro_lab import build
from gdro_lab.controllers.feedback import StepFeedback
from gdro_lab.controllers.selection import compute_metrics, fill_batch, greso_keep_probability


def feedback(ids, counts, successes, bins=None):
    y = np.asarray(successes, bool)
    return StepFeedback(ids, np.zeros(len(ids), np.int64) if bins is None else bins, counts, 2.0 * y - 1, y)


def test_greso_keep_probability_by_hand():
    keep = greso_keep_probability([0, 1, 3, 0, 0, 9], [0, 0, 0, 1, 2, 0], 0.5, 0.6, 0.01)
    np.testing.assert_allclose(keep, [1.0, 0.5, 0.125, 0.6, 0.36, 0.01])  # 0.5^9 < 0.01: floored


def test_dynamic_sampling_drops_only_constant_groups():
    selector = build("selector", "dynamic_sampling", {}, seed=0)
    fb = feedback(["a", "b", "c"], [2, 3, 2], [1, 1, 0, 1, 0, 0, 0])
    np.testing.assert_array_equal(selector.accept(fb), [False, True, False])
    np.testing.assert_array_equal(build("selector", "none", {}, 0).accept(fb), [True, True, True])


@pytest.mark.parametrize("name", ["dynamic_sampling", "greso"])
def test_dapo_filters_on_successes_not_on_graded_rewards(name):
    """DAPO's metric is acc: a group whose rewards differ while its successes are all equal is dropped (all correct,
    one with a length penalty; all wrong, one with partial credit 0.5), and a group whose successes are mixed is kept
    even when its rewards are all equal (a reward that ignores the answer)."""
    y = np.array([1, 1, 1, 0, 0, 0, 1, 0, 1, 1, 0, 0], bool)
    rewards = np.array([1.0, 1.0, 0.8, -1.0, 0.5, -1.0, 0.0, 0.0, 1.0, 1.0, 0.0, -1.0])
    fb = StepFeedback(["penalised", "partial", "flat", "plain"], np.zeros(4, np.int64), [3, 3, 2, 4], rewards, y)
    np.testing.assert_array_equal(build("selector", name, {}, seed=0).accept(fb), [False, False, True, True])


def test_greso_streaks_skip_and_adapt():
    selector = build("selector", "greso", {"p_easy": 0.5, "p_hard": 0.5}, seed=1)
    ids = ["easy", "hard"] + [f"mixed{i}" for i in range(5)]
    outcomes = [1, 1, 1, 1] + [0, 0, 0, 0] + [1, 0, 1, 0] * 5
    for _ in range(3):
        metrics = selector.update(feedback(ids, [4] * 7, outcomes))
    # 1/7 all correct >= 0.25 / 3: skip more easy ones; 1/7 all wrong < 2 * 0.25 / 3: skip fewer hard ones
    assert selector.p_easy == pytest.approx(0.47) and selector.p_hard == pytest.approx(0.53)
    assert metrics["select/easy_share"] == pytest.approx(1 / 7)
    draws = np.array([selector.screen(ids) for _ in range(4000)])
    keep_rate = draws.mean(axis=0)
    np.testing.assert_allclose(keep_rate, [0.47 ** 3, 0.53 ** 3] + [1.0] * 5, atol=0.03)
    assert selector.update(feedback(ids, [4] * 7, outcomes))["select/screened"] == 28000


def test_fill_batch_passes_over_skipped_prompts_in_order():
    class Skipper:
        screens = True

        class config:
            max_draw_factor = 3

        def screen(self, ids):
            return np.array([int(i) % 3 != 0 for i in ids])  # skip multiples of 3

    stream = iter(range(100))

    def draw(k):
        return np.array([next(stream) for _ in range(k)])

    chosen = fill_batch(Skipper(), draw, lambda items: [str(i) for i in items], 4)
    np.testing.assert_array_equal(chosen, [1, 2, 4, 5])
    assert next(stream) == 6  # drew 0..3, then 4..5: no more than needed
    nothing = fill_batch(type("Never", (Skipper,), {"screen": lambda self, ids: np.zeros(len(ids), bool)})(),
                         draw, lambda items: [str(i) for i in items], 2)
    np.testing.assert_array_equal(nothing, [7, 8])  # cap reached: earliest skipped fill the batch


def test_fill_batch_stops_when_the_candidates_run_out():
    class SkipAll:
        screens = True

        class config:
            max_draw_factor = 100

        def screen(self, ids):
            return np.array([i != "2" for i in ids])

    pool = iter([np.array([3, 4]), np.array([], np.int64)])
    chosen = fill_batch(SkipAll(), lambda k: next(pool), lambda items: [str(i) for i in items], 4,
                        first=np.array([0, 1, 2]))
    np.testing.assert_array_equal(chosen, [0, 1, 3, 4])  # the skipped "2" is not needed


def test_fill_batch_is_the_identity_for_non_screening_selectors():
    first = np.array([5, 6, 7])
    out = fill_batch(build("selector", "dynamic_sampling", {}, 0), lambda k: 1 / 0, str, 3, first)
    assert out is first


def test_compute_metrics_count_everything_generated():
    fb = feedback(["a", "b", "c"], [2, 3, 2], [1, 1, 0, 1, 0, 0, 0])
    out = compute_metrics(fb, np.array([False, True, False]), tokens_R=np.arange(7.0))
    assert out["compute/rollouts_generated"] == 7 and out["compute/rollouts_trained"] == 3
    assert out["compute/tokens_generated"] == 21 and out["compute/tokens_trained"] == 2 + 3 + 4
    assert out["compute/prompts_trained"] == 1
