"""The simulator's method configuration by value: class_gdro's weighter is sized to the world's latent groups,
every other weighter and every allocator to the difficulty bins. With the groups' size dropped, a world with
more groups than bins was caught only by the weighter's ConfigError in a run, and one with fewer by nothing."""

from __future__ import annotations

import numpy as np
import pytest

from simulators.loop import Simulation
from simulators.simulator_config import SimConfig
from simulators.simulator_methods import GROUP_METHODS
from simulators.world import WorldConfig

WORLD = WorldConfig(num_prompts=300, num_groups=6)


@pytest.mark.parametrize("method", ["class_gdro", "prompt_gdro", "joint"])
def test_the_weighters_bins_are_the_latent_groups_only_for_a_group_method(method):
    config = SimConfig(method=method, steps=2, batch=24, eval_every=10, world=WORLD, num_bins=10)
    want = 6 if method in GROUP_METHODS else 10
    values = config.controller_configs()
    assert values["weighter"]["num_bins"] == want
    assert values["allocator"]["num_bins"] == 10 and config.step_config().num_bins == 10
    sim = Simulation(config)
    assert sim.method_step.weighter.config.num_bins == want
    sim.step()
    assert np.asarray(sim.method_step.weighter.state_dict()["score"]).shape == (want,)
