"""A table of bad inputs at every public boundary of the core: each is a one-line ValueError naming the argument.

Before this table, most of these returned silent garbage (NaN advantages, truncated counts,
uniform weights, dropped bins) or raised an unrelated IndexError / ZeroDivisionError.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from gdro_lab import ConfigError
from gdro_lab.allocation.bin_plans import concave_budget_plan, exact_budget_plan
from gdro_lab.allocation.planner.exact import exact_plan
from gdro_lab.allocation.sqrt_law import adjust_to_total, round_to_budget, sqrt_allocation, sqrt_allocation_unclipped
from gdro_lab.controllers.allocators import AllocatorConfig, SqrtAllocator
from gdro_lab.controllers.feedback import StepFeedback
from gdro_lab.controllers.prompt_gdro import PromptGDRO, WeighterConfig
from gdro_lab.controllers.rollout_gdro import RolloutGDRO
from gdro_lab.functional.diagnostics import (bin_counts, bin_mean, bin_share, lead_lag_gap, normalized, se_proxy,
                                             se_report)
from gdro_lab.functional.estimators import pass_at_k
from gdro_lab.functional.grpo import grpo_advantages

NAN, INF = float("nan"), float("inf")
IDS = ["a", "b"]
OK = dict(prompt_ids=IDS, bins_P=np.array([0, 1]), counts_P=np.array([2, 2]),
          rewards_R=np.array([1.0, -1.0, 1.0, 1.0]), successes_R=np.array([True, False, True, True]))


def feedback(**changes):
    return StepFeedback(**{**OK, **changes})


def gdro_plan(bins):
    return RolloutGDRO(AllocatorConfig(num_bins=3)).plan(np.asarray(bins))


def gdro_update(bins):
    controller = RolloutGDRO(AllocatorConfig(num_bins=2))
    controller.plan(np.array([0, 1]))
    return controller.update(feedback(bins_P=np.asarray(bins)))


CASES = [
    # StepFeedback
    ("feedback NaN reward", lambda: feedback(rewards_R=np.array([1.0, NAN, 1.0, 1.0])), "rewards_R"),
    ("feedback inf reward", lambda: feedback(rewards_R=np.array([1.0, INF, 1.0, 1.0])), "rewards_R"),
    ("feedback float counts", lambda: feedback(counts_P=np.array([2.5, 1.5])), "counts_P"),
    ("feedback zero count", lambda: feedback(counts_P=np.array([0, 4])), "counts_P"),
    ("feedback bin below -1", lambda: feedback(bins_P=np.array([-2, 0])), "bins_P"),
    ("feedback float bin", lambda: feedback(bins_P=np.array([0.5, 0])), "bins_P"),
    ("feedback NaN loss", lambda: feedback(losses_R=np.array([0.0, NAN, 0.0, 0.0])), "losses_R"),
    ("feedback successes not 0/1", lambda: feedback(successes_R=np.array([0.5, 0, 1, 1])), "successes_R"),
    ("feedback empty batch", lambda: feedback(prompt_ids=[], bins_P=np.zeros(0, int), counts_P=np.zeros(0, int),
                                              rewards_R=np.zeros(0), successes_R=np.zeros(0, bool)), "prompt_ids"),
    ("feedback negative oracle variance", lambda: feedback(variance_G=np.array([-1.0, 1.0])), "variance_G"),
    ("feedback inf oracle variance", lambda: feedback(variance_G=np.array([INF, 1.0])), "variance_G"),
    ("variance_by_bin bin >= num_bins", lambda: feedback(bins_P=np.array([0, 5])).variance_by_bin(2), "bins_P"),
    # pass@k
    ("pass@k float n", lambda: pass_at_k(4.9, 4, 2), "n"),
    ("pass@k float c", lambda: pass_at_k(8, 2.5, 2), "c"),
    ("pass@k float k", lambda: pass_at_k(8, 2, 2.5), "k"),
    ("pass@k NaN n", lambda: pass_at_k(np.array([NAN, 4.0]), np.array([1, 1]), 2), "n"),
    ("pass@k c > n", lambda: pass_at_k(4, 5, 2), "c"),
    ("pass@k k > n", lambda: pass_at_k(4, 1, 5), "k"),
    ("pass@k bool", lambda: pass_at_k(np.array([True]), np.array([1]), 1), "n"),
    ("pass@k shape mismatch", lambda: pass_at_k(np.array([4, 4]), np.array([1, 1, 1]), 2), "c"),
    # allocation
    ("sqrt NaN variance", lambda: sqrt_allocation(np.array([1.0, NAN]), np.array([0.5, 0.5]), 4, 2, 12),
     "variance_G"),
    ("sqrt negative variance", lambda: sqrt_allocation(np.array([1.0, -1.0]), np.array([0.5, 0.5]), 4, 2, 12),
     "variance_G"),
    ("sqrt NaN share", lambda: sqrt_allocation(np.array([1.0, 1.0]), np.array([0.5, NAN]), 4, 2, 12), "share_G"),
    ("sqrt negative share", lambda: sqrt_allocation(np.array([1.0, 1.0]), np.array([1.5, -0.5]), 4, 2, 12),
     "share_G"),
    ("sqrt zero shares", lambda: sqrt_allocation(np.array([1.0, 1.0]), np.zeros(2), 4, 2, 12), "share_G"),
    ("sqrt shape mismatch", lambda: sqrt_allocation(np.ones(3), np.array([0.5, 0.5]), 4, 2, 12), "share_G"),
    ("sqrt n_bar outside box", lambda: sqrt_allocation(np.ones(2), np.array([0.5, 0.5]), 13, 2, 12), "n_bar"),
    ("sqrt NaN n_bar", lambda: sqrt_allocation(np.ones(2), np.array([0.5, 0.5]), NAN, 2, 12), "n_bar"),
    ("sqrt negative n_min", lambda: sqrt_allocation(np.ones(2), np.array([0.5, 0.5]), 4, -1, 12), "n_min"),
    ("unclipped NaN variance", lambda: sqrt_allocation_unclipped(np.array([NAN, 1.0]), np.ones(2), 4),
     "variance_G"),
    ("round_to_budget NaN", lambda: round_to_budget(np.array([NAN, 4.0]), 8, 2, 12), "target_P"),
    ("round_to_budget float total", lambda: round_to_budget(np.array([4.0, 4.0]), 8.5, 2, 12), "total"),
    ("adjust_to_total float total", lambda: adjust_to_total(np.array([4, 4]), 7.5, 2, 12), "total"),
    ("adjust_to_total float n", lambda: adjust_to_total(np.array([4.5, 4]), 8, 2, 12), "n_P"),
    # planners
    ("exact_plan bin >= G", lambda: exact_plan(np.zeros((2, 3)), np.array([0, 2]), 6, 2), "bins_P"),
    ("exact_plan unassigned", lambda: exact_plan(np.zeros((2, 3)), np.array([0, -1]), 6, 2), "bins_P"),
    ("exact_plan NaN log-prob", lambda: exact_plan(np.array([[0.0, NAN]]), np.array([0]), 2, 2), "log_prob_GA"),
    ("exact_plan +inf log-prob", lambda: exact_plan(np.array([[0.0, INF]]), np.array([0]), 2, 2), "log_prob_GA"),
    ("exact_plan float total", lambda: exact_plan(np.zeros((1, 3)), np.array([0]), 2.5, 2), "total"),
    ("exact_plan total too large", lambda: exact_plan(np.zeros((1, 3)), np.array([0]), 9, 2), "total"),
    ("concave plan bin >= G", lambda: concave_budget_plan(np.zeros((2, 3)), np.array([0, 2]), 6, 2), "bins_P"),
    ("dp NaN log-prob", lambda: exact_budget_plan(np.array([[0.0, NAN]]), np.array([1]), 2, 2), "log_prob_GA"),
    ("dp float counts", lambda: exact_budget_plan(np.zeros((1, 2)), np.array([1.5]), 2, 2), "count_G"),
    ("dp bad weight", lambda: exact_budget_plan(np.zeros((1, 2)), np.array([1]), 2, 2, weight="prompts"),
     "weight"),
    # controllers
    ("allocator plan bin >= G", lambda: gdro_plan([0, 3]), "bins_P"),
    ("allocator plan bin < -1", lambda: gdro_plan([0, -2]), "bins_P"),
    ("allocator update bin >= G", lambda: gdro_update([0, 2]), "bins_P"),
    ("sqrt allocator plan bin >= G", lambda: SqrtAllocator(AllocatorConfig(num_bins=2)).plan(np.array([2])),
     "bins_P"),
    ("weighter multipliers bin >= G", lambda: PromptGDRO(WeighterConfig(num_bins=2)).multipliers(np.array([2])),
     "bins_P"),
    ("weighter update bin >= G",
     lambda: PromptGDRO(WeighterConfig(num_bins=1)).update(feedback()), "bins_P"),
    # GRPO
    ("grpo NaN reward", lambda: grpo_advantages(np.array([1.0, NAN]), np.array([2])), "rewards_R"),
    ("grpo float counts", lambda: grpo_advantages(np.array([1.0, 0.0]), np.array([1.5, 0.5])), "counts_P"),
    ("grpo bad singleton", lambda: grpo_advantages(np.array([1.0]), np.array([1]), singleton="drop"), "singleton"),
    ("grpo bad std", lambda: grpo_advantages(np.array([1.0, 0.0]), np.array([2]), std="sample"), "std"),
    # diagnostics
    ("lead_lag empty", lambda: lead_lag_gap(np.zeros(0), np.zeros(0)), "weights_G"),
    ("lead_lag NaN weight", lambda: lead_lag_gap(np.array([NAN, 1.0]), np.array([0.5, 0.5])), "weights_G"),
    ("lead_lag negative weight", lambda: lead_lag_gap(np.array([-1.0, 2.0]), np.array([0.5, 0.5])), "weights_G"),
    ("lead_lag zero weights", lambda: lead_lag_gap(np.zeros(2), np.array([0.5, 0.5])), "weights_G"),
    ("lead_lag zero share", lambda: lead_lag_gap(np.ones(2), np.zeros(2)), "share_G"),
    ("lead_lag length mismatch", lambda: lead_lag_gap(np.ones(3), np.ones(2)), "share_G"),
    ("normalized zero sum", lambda: normalized(np.zeros(3)), "weights_G"),
    ("se_proxy NaN sigma on active bin", lambda: se_proxy(np.array([0.5, 0.5]), np.array([1.0, NAN]),
                                                          np.array([4.0, 4.0])), "sigma_G"),
    ("se_proxy zero rollouts on active bin", lambda: se_proxy(np.array([0.5, 0.5]), np.array([1.0, 1.0]),
                                                              np.array([4.0, 0.0])), "n_G"),
    ("se_report NaN n", lambda: se_report(np.array([0.5, 0.5]), np.ones(2), np.array([4.0, NAN]), 4, 2, 12), "n_G"),
    ("bin_counts bin >= G", lambda: bin_counts(np.array([0, 4]), 3), "bins_P"),
    ("bin_share bin < -1", lambda: bin_share(np.array([0, -3]), 3), "bins_P"),
    ("bin_mean bin >= G", lambda: bin_mean(np.ones(2), np.array([0, 3]), 3), "bins_P"),
]


@pytest.mark.parametrize("name,call,argument", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_a_one_line_error_naming_the_argument(name, call, argument):
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message
    assert argument in message, message
    assert "must" in message or "need" in message, message


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


def test_good_inputs_still_work():
    """The checks accept what they should: integral floats, -1 bins, empty pass@k, -inf log-probs."""
    assert float(pass_at_k(8.0, 2.0, 2)) == pytest.approx(1 - 15 / 28)
    assert pass_at_k(np.zeros(0, int), np.zeros(0, int), 2).shape == (0,)
    fb = feedback(bins_P=np.array([-1, 1]), counts_P=np.array([2.0, 2.0]))
    assert np.isnan(fb.variance_by_bin(2)[0])
    plan = exact_plan(np.array([[0.0, -np.inf, -1.0]]), np.array([0, 0]), 8, 2)
    np.testing.assert_array_equal(np.sort(plan), [4, 4])
    assert math.isfinite(lead_lag_gap(np.array([0.0, 1.0]), np.array([1.0, 0.0]))[0])


def test_check_bins_gives_one_verdict_for_every_form_of_the_same_bins() -> None:
    """check_bins' fast path (an int64 array, checked by its minimum and maximum) accepts and refuses exactly
    what the converting path does for the same values as a list or int32 array, with the same one line."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from gdro_lab.checks import check_bins

    @settings(max_examples=300, deadline=None)
    @given(values=st.lists(st.integers(-3, 6), max_size=12), unassigned=st.booleans())
    def same_verdict(values: list[int], unassigned: bool) -> None:
        outcomes = []
        for form in (np.array(values, np.int64), np.array(values, np.int32), values):
            try:
                outcomes.append(check_bins("owner", "bins_P", form, 4, allow_unassigned=unassigned).tolist())
            except ConfigError as error:
                outcomes.append(str(error))
        assert outcomes[0] == outcomes[1] == outcomes[2]

    same_verdict()
