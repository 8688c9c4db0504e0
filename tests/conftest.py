"""Shared fixtures: a small stationary world that produces StepFeedback for the controllers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from gdro_lab.feedback import StepFeedback


@dataclass
class ToyWorld:
    """Fixed prompts with fixed success probabilities; rollouts are Bernoulli, rewards +-1.

    ``step_seed`` makes the outcome of a step a function of (seed, step, plan) only, so two
    controllers given the same plans see the same feedback.
    """

    success_P: np.ndarray
    seed: int = 0

    @property
    def prompt_ids(self) -> list[str]:
        return [f"toy:train:{i}" for i in range(self.success_P.size)]

    def batch(self, step: int, size: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, step, 1])
        return rng.choice(self.success_P.size, size=size, replace=False)

    def feedback(self, step: int, index_P: np.ndarray, bins_P: np.ndarray, counts_P: np.ndarray,
                 variance_G: np.ndarray | None = None) -> StepFeedback:
        rng = np.random.default_rng([self.seed, step, 2])
        success = rng.random(int(np.sum(counts_P))) < np.repeat(self.success_P[index_P], counts_P)
        ids = [f"toy:train:{i}" for i in index_P]
        return StepFeedback(ids, np.asarray(bins_P), np.asarray(counts_P), 2.0 * success - 1.0, success,
                            variance_G=variance_G)


@pytest.fixture
def toy_world() -> ToyWorld:
    rng = np.random.default_rng(123)
    return ToyWorld(rng.beta(0.6, 0.6, size=400), seed=7)
