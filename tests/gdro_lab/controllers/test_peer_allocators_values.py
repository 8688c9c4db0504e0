"""CERO's prior by value where a sampled mutant survived its own tests: the default is the uniform Beta(1, 1)
its docs promise, so a prompt after s successes in n rollouts has v = E[p (1 - p)] under Beta(1 + s, 1 + n - s)
and an unseen prompt's price is theta0 = (1/6) e^(-n_bar / s)."""

from __future__ import annotations

import numpy as np
import pytest

from gdro_lab.controllers.feedback import StepFeedback
from gdro_lab.controllers.peer_allocators import CEROAllocator


def test_ceros_default_prior_is_uniform():
    allocator = CEROAllocator()
    cfg = allocator.config
    assert allocator.theta0 == pytest.approx(np.exp(-cfg.n_bar / cfg.saturation) / 6)   # E[p (1 - p)] = 1/6
    y = np.array([1, 1, 1, 0] + [0, 0, 0, 0], bool)
    allocator.update(StepFeedback(["a", "b"], np.zeros(2, np.int64), np.array([4, 4]), 2.0 * y - 1, y))
    a, b = 1 + np.array([3, 0]), 1 + np.array([1, 4])        # Beta(1 + s, 1 + f)
    np.testing.assert_allclose(allocator.values(allocator.stats.rows(["a", "b"])),
                               a * b / ((a + b) * (a + b + 1)), rtol=1e-12)
