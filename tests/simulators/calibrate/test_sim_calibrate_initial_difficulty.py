"""Stage 1 of the calibration: the pass-count likelihood against Monte Carlo, and recovery of known worlds."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import binom

from simulators.calibrate import initial_difficulty as D
from simulators.world import WorldConfig, make_world

VALUES = {"difficulty_offset": -1.0, "group_difficulty_scale": 0.8, "group_difficulty_tail": 2.0,
          "prompt_difficulty_scale": 1.2, "prompt_difficulty_tail": 1.3, "unsolvable_frac": 0.1,
          "always_solved_frac": 0.15}


def world_counts(values: dict, num_prompts: int, num_groups: int, k: int, seed: int) -> tuple[WorldConfig, D.SuccessCounts]:
    """Success counts of k samples per prompt of a simulator world at the start of training (the truth)."""
    ranks = list(np.random.default_rng(seed + 100).permutation(num_groups))
    cfg = WorldConfig(num_prompts=num_prompts, num_groups=num_groups, heldout_frac=0.0,
                      group_hardness_rank=ranks, **values)
    world = make_world(cfg, np.random.default_rng(seed))
    c = np.random.default_rng(seed + 1).binomial(k, expit(-world.difficulty_P))
    names = tuple(f"g{g}" for g in range(num_groups))
    return cfg, D.SuccessCounts(names, world.group_P, c, np.full(c.size, k))


def test_count_pmf_matches_monte_carlo_of_the_world() -> None:
    """P(c | group) of the mixture against the histogram of the simulator's own draws (200k prompts)."""
    cfg, data = world_counts(VALUES, 200_000, 4, 8, seed=0)
    pmf = D.count_pmf(VALUES, np.asarray(cfg.group_hardness_rank), 8, nodes=2000)
    observed = data.table()[8]
    for g in range(4):
        freq = observed[g] / observed[g].sum()
        se = np.sqrt(pmf[g] * (1 - pmf[g]) / observed[g].sum())
        assert np.all(np.abs(freq - pmf[g]) < 4.5 * se + 1e-4), (g, freq, pmf[g])


def test_count_pmf_single_prompt_is_a_binomial() -> None:
    """With no prompt spread (tiny c_p, light tail) and no extra masses, P(c) is Bin(n, sigmoid(-a_g))."""
    values = {**VALUES, "prompt_difficulty_scale": 1e-9, "unsolvable_frac": 0.0, "always_solved_frac": 0.0}
    ranks = np.array([1, 0])
    pmf = D.count_pmf(values, ranks, 6)
    offsets = D.group_offsets(values, ranks)
    for g in range(2):
        np.testing.assert_allclose(pmf[g], binom.pmf(np.arange(7), 6, expit(-offsets[g])), atol=1e-7)


def test_batched_likelihood_equals_one_at_a_time() -> None:
    _, data = world_counts(VALUES, 3000, 5, 8, seed=2)
    ranks = D.hardness_ranks(data.group_success())
    table = data.table()
    free, fixed = D.free_params(5)
    x = np.stack([D._to_vector(VALUES, free) + d for d in (0.0, 0.1, -0.2)])
    batched = D.negative_loglik(D._to_values(x, free, fixed), ranks, table)
    single = [D.negative_loglik(D._to_values(row, free, fixed), ranks, table) for row in x]
    np.testing.assert_allclose(batched, single, rtol=1e-12)


def test_zipf_exponent_against_a_grid() -> None:
    sizes = np.array([500, 240, 180, 120, 90, 40])
    ranks = np.log(np.arange(6) + 1.0)
    grid = np.linspace(0, 4, 40001)
    loglik = [np.sum(sizes * (-s * ranks - np.log(np.sum(np.exp(-s * ranks))))) for s in grid]
    assert D.zipf_exponent(sizes) == pytest.approx(grid[int(np.argmax(loglik))], abs=2e-4)
    assert D.zipf_exponent(sizes[::-1]) == pytest.approx(D.zipf_exponent(sizes))


def test_hardness_ranks_order_groups_by_success() -> None:
    np.testing.assert_array_equal(D.hardness_ranks(np.array([0.2, 0.9, 0.5, 0.9])), [3, 0, 2, 1])


def test_fit_recovers_a_known_world_with_covering_intervals() -> None:
    """The fast version of the recovery study (docs/calibration.md): one known world, 3,000 prompts x 8 samples.
    The offset and the always-solved mass are pinned; the never-solved mass trades off against the Lomax tail
    (both make prompts that are never solved), so only its interval is checked."""
    cfg, data = world_counts(VALUES, 3000, 6, 8, seed=5)
    fit = D.fit_difficulty(data, boots=40, seed=1)
    # ranks come from the groups' mean success: neighbours 0.1 logit apart may swap, the order holds
    assert np.corrcoef(fit.ranks_K, cfg.group_hardness_rank)[0, 1] > 0.8
    for name, tolerance in (("difficulty_offset", 0.4), ("always_solved_frac", 0.05)):
        assert fit.values[name] == pytest.approx(VALUES[name], abs=tolerance), name
    covered = {n: fit.interval(n)[0] <= VALUES[n] <= fit.interval(n)[1] for n in D.PARAMS}
    assert sum(covered.values()) >= len(D.PARAMS) - 1, covered
    assert covered["unsolvable_frac"], covered


def test_one_group_fixes_the_group_scale() -> None:
    _, data = world_counts({**VALUES, "group_difficulty_scale": 0.0}, 800, 1, 4, seed=3)
    fit = D.fit_difficulty(data, boots=3)
    assert fit.values["group_difficulty_scale"] == 0.0
    assert np.all(fit.draws["group_difficulty_scale"] == 0.0)
