"""StepFeedback by value where a sampled mutant survived its own tests: int prompt ids with their index, and
the per-bin sums (one per bin, unassigned prompts left out)."""

from __future__ import annotations

import numpy as np
import pytest

from gdro_lab import ConfigError
from gdro_lab.controllers.feedback import StepFeedback
from gdro_lab.controllers.prompts import PromptIndex


def feedback(prompt_ids, prompts=None, bins=(0, 2, -1)) -> StepFeedback:
    y = np.array([1, 0, 1, 1, 0, 0], bool)
    return StepFeedback(prompt_ids, np.array(bins, np.int64), np.array([2, 2, 2]), 2.0 * y - 1, y, prompts=prompts)


def test_int_prompt_ids_index_their_prompt_index_and_need_one():
    prompts = PromptIndex(["a", "b", "c", "d"])
    step = feedback(np.array([3, 0, 2], np.int64), prompts=prompts)
    assert step.prompts is prompts and list(prompts.ids_of(np.asarray(step.prompt_ids))) == ["d", "a", "c"]
    with pytest.raises(ConfigError, match="integer indices but prompts is None"):
        feedback(np.array([3, 0, 2], np.int64))


def test_bin_sums_has_one_sum_per_bin_and_leaves_unassigned_prompts_out():
    assert feedback(["a", "b", "c"]).bin_sums(np.array([1.5, 2.0, 7.0]), 3) == [1.5, 0.0, 2.0]
