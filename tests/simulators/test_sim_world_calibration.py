"""World fields the calibration writes: the always-solved mass, explicit group shares and hardness ranks."""

from __future__ import annotations

import numpy as np
import pytest

from gdro_lab import ConfigError
from simulators.world import WorldConfig, group_sizes, lomax_quantile, make_world


def test_default_world_draws_are_unchanged() -> None:
    """With always_solved_frac = 0 the difficulty draws are the old ones: d0 + c_g H + c_p Lomax (+12 unsolvable)."""
    cfg = WorldConfig(num_prompts=500, num_groups=5, unsolvable_frac=0.2, heldout_frac=0.0)
    world = make_world(cfg, np.random.default_rng(3))
    rng = np.random.default_rng(3)
    sizes = group_sizes(cfg, rng)
    rng.standard_normal(cfg.num_groups)  # the rarity-hardness key
    group = rng.permutation(np.repeat(np.arange(cfg.num_groups), sizes))
    np.testing.assert_array_equal(group, world.group_P)
    hardness = world.group_hardness_K[group]
    expected = (cfg.difficulty_offset + cfg.group_difficulty_scale * hardness
                + cfg.prompt_difficulty_scale * rng.pareto(cfg.prompt_difficulty_tail, group.size))
    expected = expected + 12.0 * (rng.random(group.size) < 0.2)
    np.testing.assert_allclose(world.difficulty_P, expected)


def test_always_and_never_solved_masses() -> None:
    cfg = WorldConfig(num_prompts=20000, num_groups=4, unsolvable_frac=0.15, always_solved_frac=0.25, heldout_frac=0.0,
                      prompt_difficulty_tail=20.0)  # a light tail: no natural difficulty reaches +-6
    d = make_world(cfg, np.random.default_rng(0)).difficulty_P
    base = cfg.difficulty_offset
    assert np.mean(d >= base + 6) == pytest.approx(0.15, abs=0.01)
    assert np.mean(d < base - 6) == pytest.approx(0.25, abs=0.01)


def test_explicit_group_shares_and_ranks() -> None:
    cfg = WorldConfig(num_prompts=1000, num_groups=3, group_shares=[0.2, 0.5, 0.3], group_hardness_rank=[2, 0, 1],
                      group_difficulty_tail=2.0, heldout_frac=0.0)
    world = make_world(cfg, np.random.default_rng(1))
    np.testing.assert_array_equal(world.sizes_K, [200, 500, 300])
    np.testing.assert_allclose(world.group_hardness_K, lomax_quantile((np.array([2, 0, 1]) + 0.5) / 3, 2.0))


@pytest.mark.parametrize("values", [{"group_shares": [0.5, 0.5]}, {"group_hardness_rank": [0, 0, 1]},
                                    {"group_shares": [1.0, -1.0, 1.0]}, {"always_solved_frac": 0.5, "unsolvable_frac": 0.6}])
def test_bad_group_fields_are_one_line_errors(values: dict) -> None:
    with pytest.raises(ConfigError, match="WorldConfig"):
        WorldConfig(num_prompts=100, num_groups=3, **values)
