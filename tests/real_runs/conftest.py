"""Fixtures for the real-run tests: the shared data folder and one reward worker pool per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from real_runs.data import data_root


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (or ``$GDRO_DATA``); tests that read real data skip without it."""
    root = data_root()
    if not (root / "math500" / "test.jsonl").exists():
        pytest.skip(f"shared data folder {root} not found: set GDRO_DATA")
    return root


@pytest.fixture(scope="session")
def math_reward():
    """A MathReward with 2 workers and a 6 s hard timeout, shared by the reward tests."""
    from real_runs.reward import MathReward

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    reward = MathReward(timeout_s=6.0, num_workers=2)
    yield reward
    reward.close()
