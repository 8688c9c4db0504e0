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
