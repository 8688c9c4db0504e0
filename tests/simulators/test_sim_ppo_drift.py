"""The paper's surrogate-loss signal with PPO mini-batch drift."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from gdro_lab.functional.grpo import group_mean, grpo_advantages
from simulators.learner import Learner
from simulators.loop import Simulation
from simulators.ppo_drift import surrogate_losses
from simulators.simulator_config import SimConfig
from simulators.world import WorldConfig, make_world, sample_rollouts


def _setup(seed: int = 0) -> tuple[Learner, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    cfg = WorldConfig(num_prompts=200, num_groups=4)
    learner = Learner(cfg, make_world(cfg, np.random.default_rng(seed)))
    rng = np.random.default_rng(seed + 1)
    index = rng.choice(200, 12, replace=False)
    counts = rng.integers(2, 7, 12)
    p = learner.success_prob(index)
    y = sample_rollouts(rng, p, counts)
    noise = rng.standard_normal(y.size)
    return learner, index, counts, p, y, noise


def test_one_minibatch_is_on_policy_and_averages_to_zero() -> None:
    learner, index, counts, p, y, noise = _setup()
    losses = surrogate_losses(learner, index, counts, y, p, noise, 1, 0.2, 4)
    np.testing.assert_allclose(group_mean(losses, counts), 0.0, atol=1e-12)


def test_drift_matches_a_naive_sequential_loop() -> None:
    learner, index, counts, p, y, noise = _setup(3)
    M, eps = 3, 0.2
    losses = surrogate_losses(learner, index, counts, y, p, noise, M, eps, 4)
    # Reference: apply each mini-batch's unweighted step to a copy of the learner, one after another.
    copy = Learner(learner.config, learner.world)
    g, _ = learner.gradient(y, counts, p, noise)
    adv, _ = grpo_advantages(2.0 * y - 1.0, counts)
    starts = np.concatenate([[0], np.cumsum(counts)])
    expected = np.empty_like(losses)
    for part in np.array_split(np.arange(index.size), M):
        z_old = np.log(p[part] / (1 - p[part]))
        z_new = z_old + copy.shared + copy.group_skill_K[learner.world.group_P[index[part]]]
        for local, i in enumerate(part):
            for r in range(starts[i], starts[i + 1]):
                new, old = expit(z_new[local]), p[i]
                rho = new / old if y[r] else (1 - new) / (1 - old)
                expected[r] = -min(rho * adv[r], np.clip(rho, 1 - eps, 1 + eps) * adv[r])
        d0, dK, _ = copy.step_direction(index[part], counts[part], g[part], np.ones(part.size), 4)
        copy.shared += d0
        copy.group_skill_K += dK
    np.testing.assert_allclose(losses, expected, rtol=1e-9, atol=1e-12)
    first = np.array_split(np.arange(index.size), M)[0]
    np.testing.assert_allclose(group_mean(losses, counts)[first], 0.0, atol=1e-12)  # on-policy mini-batch
    assert np.any(np.abs(group_mean(losses, counts)) > 1e-6)  # drift afterwards


def test_prompt_gdro_as_published_runs_on_the_surrogate_signal() -> None:
    world = WorldConfig(num_prompts=400, num_groups=8)
    runs = {}
    for m in (1, 4):
        sim = Simulation(SimConfig(method="prompt_gdro", steps=30, batch=32, snapshot_every=-1, world=world,
                                   weighter={"signal": "surrogate"}, ppo_minibatches=m))
        for _ in range(30):
            sim.step(record=False)
        runs[m] = sim.weighter.score_G.copy()
    assert np.allclose(runs[1], 0.0, atol=1e-9)  # on-policy: the published signal carries nothing
    assert np.abs(runs[4]).max() > 1e-6  # with drift it does
    with pytest.raises(Exception, match="ppo_minibatches"):
        SimConfig(ppo_minibatches=0)
