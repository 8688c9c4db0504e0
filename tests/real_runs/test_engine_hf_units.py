"""The hf engine's side effects that mutation testing (scripts/mutation.sh) found unpinned."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from real_runs.engines.hf import HFEngine  # noqa: E402
from real_runs.models import load_policy  # noqa: E402
from real_runs.types import SamplingParams  # noqa: E402


def test_generate_leaves_the_models_generation_config_as_it_was():
    """The engine swaps in a clean GenerationConfig for the call only: the caller's object (saved
    with the model by save_pretrained) is the same object, unchanged, afterwards."""
    torch.set_num_threads(1)
    model, tokenizer = load_policy("tiny", seed=0)
    before = model.generation_config
    snapshot = before.to_dict()
    HFEngine(model, tokenizer).generate(["Say 1"], np.array([2]), SamplingParams(max_new_tokens=2, seed=0))
    assert model.generation_config is before and model.generation_config.to_dict() == snapshot
