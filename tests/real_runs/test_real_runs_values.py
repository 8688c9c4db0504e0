"""Bounds of the training configuration by value where sampled mutants survived their tests: data.limit
must be an integer >= 0 (0 = every row), and a generation of a single new token is a valid sampling."""

from __future__ import annotations

import dataclasses

import pytest

from gdro_lab import ConfigError
from real_runs.config import DataConfig
from real_runs.engines.hf import check_sampling
from real_runs.types import SamplingParams


@pytest.mark.parametrize("limit", [-1, 2.5, "10"])
def test_a_data_limit_that_is_not_an_integer_at_least_zero_is_one_line(limit):
    with pytest.raises(ConfigError, match="limit"):
        DataConfig(train="math12k", limit=limit)
    assert DataConfig(train="math12k", limit=0).limit == 0 and DataConfig(train="math12k", limit=7).limit == 7


def test_one_new_token_is_a_valid_sampling_and_zero_is_not():
    check_sampling(dataclasses.replace(SamplingParams(), max_new_tokens=1))
    with pytest.raises(ValueError, match="max_new_tokens must be >= 1"):
        check_sampling(dataclasses.replace(SamplingParams(), max_new_tokens=0))


@pytest.mark.parametrize("lr_extend", [-1, 1.5])
def test_the_lm_studys_lr_extension_must_be_an_integer_at_least_zero(lr_extend):
    from real_runs.lmstudy.learning_study import StudyConfig

    with pytest.raises(ConfigError, match="lr_extend"):
        StudyConfig(lr_extend=lr_extend)
    assert StudyConfig(lr_extend=0).lr_extend == 0
