"""The calibration's vectorised GRPO against the simulator's own loop (simulators.loop.Simulation)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from simulators.calibrate.fastsim import run_grpo
from simulators.loop import Simulation
from simulators.simulator_config import SimConfig
from simulators.world import WorldConfig


def loop_run(world: WorldConfig, seed: int, steps: int, lr_scale: float) -> tuple[Simulation, list[float]]:
    """The reference: Simulation(method='grpo') stepped by hand, expected batch success before each step."""
    sim = Simulation(SimConfig(method="grpo", seed=seed, batch=24, n_bar=4, steps=steps, world=world,
                               lr_scale=lr_scale))
    success = []
    for _ in range(steps):
        order, position = sim.sampler.order.copy(), sim.sampler.position
        index = order[position:position + 24] if position + 24 <= order.size else None
        if index is not None:
            success.append(float(sim.learner.success_prob(index).mean()))
        else:
            success.append(np.nan)
        sim.step(record=False)
    return sim, success


@pytest.mark.parametrize("aggregation,std,normalize", [("prompt", "population", True), ("rollout", "bessel", True),
                                                       ("prompt", "population", False)])
def test_one_setting_reproduces_the_loop(aggregation: str, std: str, normalize: bool) -> None:
    world = WorldConfig(num_prompts=240, num_groups=5, transfer=0.3, interference=0.1, unsolvable_frac=0.05,
                        always_solved_frac=0.05, aggregation=aggregation, advantage_std=std, normalize_std=normalize)
    sim, success = loop_run(world, seed=4, steps=25, lr_scale=1.7)
    curves = run_grpo(world, 4, batch=24, n=4, steps=25, eval_steps=[0, 25], values={"lr_scale": 1.7}, count=1)
    learner = sim.learner
    train = expit(learner.shared + learner.group_skill_K[sim.world.group_P] + learner.prompt_skill_P
                  - sim.world.difficulty_P).mean()
    assert curves.train_ME[0, -1] == pytest.approx(train, rel=1e-10)
    assert curves.heldout_ME[0, -1] == pytest.approx(learner.heldout_prob().mean(), rel=1e-10)
    ok = np.isfinite(success)
    np.testing.assert_allclose(curves.success_MT[0, ok], np.array(success)[ok], rtol=1e-10)
    per_group = np.bincount(sim.world.heldout_group_H, learner.heldout_prob(), 5) / np.bincount(sim.world.heldout_group_H)
    np.testing.assert_allclose(curves.heldout_MEK[0, -1], per_group, rtol=1e-10)


def test_settings_advance_independently() -> None:
    """Each row of a batch of settings is the run of that setting alone (common random numbers)."""
    world = WorldConfig(num_prompts=200, num_groups=4, score_noise=1.0, update_noise=0.1)
    values = {"lr_group": np.array([0.1, 0.5, 0.2]), "curvature": np.array([0.0, 0.3, 1.0]),
              "score_noise": np.array([0.5, 2.0, 4.0]), "transfer": np.array([0.0, 1.0, 0.5]),
              "lr_scale": np.array([1.0, 0.5, 2.0])}
    together = run_grpo(world, 1, batch=20, n=3, steps=15, eval_steps=[5, 15], values=values, count=3)
    for m in range(3):
        alone = run_grpo(world, 1, batch=20, n=3, steps=15, eval_steps=[5, 15],
                         values={k: v[m] for k, v in values.items()}, count=1)
        np.testing.assert_allclose(together.heldout_MEK[m], alone.heldout_MEK[0], rtol=1e-12)
        np.testing.assert_allclose(together.observed_MT[m], alone.observed_MT[0], rtol=1e-12)


def test_faster_learning_rate_learns_faster_without_a_price() -> None:
    world = WorldConfig(num_prompts=400, num_groups=4, curvature=0.0, update_noise=0.0, score_noise=0.0)
    curves = run_grpo(world, 0, batch=40, n=4, steps=30, eval_steps=[0, 30], values={"lr_scale": np.array([0.5, 2.0])},
                      count=2)
    gain = curves.train_ME[:, -1] - curves.train_ME[:, 0]
    assert 0 < gain[0] < gain[1]
