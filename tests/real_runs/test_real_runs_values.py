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


@pytest.mark.parametrize("name, billions, non_embedding", [("Qwen/Qwen3-1.7B-Base", 1.7, 1.4),
                                                           ("Qwen/Qwen3-4B-Base", 4.0, 3.6),
                                                           ("Qwen/Qwen3-8B-Base", 8.2, 6.95)])
def test_the_paper_models_sizes_are_their_model_cards(name, billions, non_embedding):
    """Qwen3's model cards: 1.7B (1.4B without embeddings), 4.0B (3.6B), 8.2B (6.95B); the two small models
    tie their input and output embeddings, the 8B does not."""
    from real_runs.memory import QWEN3_SHAPES, Shape

    shape = Shape.of(QWEN3_SHAPES[name])
    assert shape.parameters / 1e9 == pytest.approx(billions, abs=0.05)
    embeddings = shape.vocab * shape.hidden * (1 if shape.tied else 2)
    assert (shape.parameters - embeddings) / 1e9 == pytest.approx(non_embedding, abs=0.05)


def test_the_activation_memory_of_one_layer_by_hand():
    """T (4 (2h + 3 h_q + 2 kv + 4 I) + 8h) per layer: h = 2, h_q = kv = 2, I = 3, T = 5 give 600 bytes."""
    from real_runs.memory import Shape, project

    shape = Shape(hidden=2, intermediate=3, layers=2, heads=1, kv_heads=1, head_dim=2, vocab=7, tied=True)
    full = project(shape, micro_batch_tokens=5, kl=False, gradient_checkpointing=False)
    assert full.update["every layer's activations"] == 2 * 600
    checkpointed = project(shape, micro_batch_tokens=5, kl=False, gradient_checkpointing=True)
    assert checkpointed.update["one layer recomputed"] == 600 and checkpointed.update["checkpointed layer inputs 4LTh"] == 80
