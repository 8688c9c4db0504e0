"""The world: closed-form expected update against independent references and Monte Carlo."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from gdro_lab import ConfigError
from gdro_lab.functional.grpo import grpo_advantages
from simulators.learner import Learner, expected_gradient
from simulators.world import BatchSampler, WorldConfig, group_sizes, make_world, sample_rollouts


def reference_expected_gradient(p: float, n: int) -> float:
    """Enumerate c = 0..n: build one reward vector with c successes, score it with gdro_lab's GRPO
    advantages (independent of the world's phi), weight by the binomial pmf."""
    total = 0.0
    for c in range(n + 1):
        y = np.array([1.0] * c + [0.0] * (n - c))
        advantages, _ = grpo_advantages(2 * y - 1, np.array([n]))
        total += stats.binom.pmf(c, n, p) * float(np.mean(advantages * (y - p)))
    return total


@pytest.mark.parametrize("n", [2, 3, 4, 7, 12])
@pytest.mark.parametrize("p", [0.01, 0.2, 0.5, 0.9])
def test_expected_gradient_matches_enumeration(p: float, n: int) -> None:
    assert expected_gradient(np.array([p]), np.array([n]))[0] == pytest.approx(reference_expected_gradient(p, n),
                                                                               rel=1e-9, abs=1e-12)


def test_expected_gradient_is_not_the_reward_gradient() -> None:
    """GRPO's normalisation changes the mean update: E[g] != 2 p (1 - p) and grows with n."""
    p = np.full(3, 0.1)
    e = expected_gradient(p, np.array([2, 4, 12]))
    assert np.all(np.diff(e) > 0)
    assert not np.allclose(e, 2 * 0.1 * 0.9)


def _learner(score_noise: float = 2.0, aggregation: str = "prompt", interference: float = 0.3,
             transfer: float = 0.0, **world: float) -> Learner:
    cfg = WorldConfig(num_prompts=64, num_groups=4, score_noise=score_noise, aggregation=aggregation,
                      interference=interference, transfer=transfer, **world)
    return Learner(cfg, make_world(cfg, np.random.default_rng(1)))


@pytest.mark.parametrize("noise", [0.0, 2.0])
def test_gradient_estimate_is_unbiased(noise: float) -> None:
    """Mean over many sampled batches of g_i equals the closed form, within 5 standard errors."""
    learner = _learner(noise)
    rng = np.random.default_rng(7)
    p = np.array([0.03, 0.2, 0.5, 0.8, 0.97, 0.35])
    counts = np.array([2, 4, 12, 3, 8, 5])
    draws = 20000  # one big batch of draws x prompts (the estimate is per prompt, so this is exact MC)
    p_all, counts_all = np.tile(p, draws), np.tile(counts, draws)
    y = sample_rollouts(rng, p_all, counts_all)
    estimates = learner.gradient(y, counts_all, p_all, rng.standard_normal(y.size))[0].reshape(draws, p.size)
    mean = estimates.mean(axis=0)
    se = estimates.std(axis=0, ddof=1) / np.sqrt(draws)
    exact = np.array([reference_expected_gradient(pi, ni) for pi, ni in zip(p, counts)])
    assert np.all(np.abs(mean - exact) <= 5 * se + 1e-12)


def test_score_noise_variance_is_tau_squared_over_n() -> None:
    """The noise part of g_i has variance tau^2 P(mixed) / n (sum_j A_ij^2 = n on mixed groups)."""
    learner = _learner(2.0)
    rng = np.random.default_rng(3)
    p, counts = np.array([0.5, 0.5]), np.array([2, 8])
    draws = 40000
    p_all, counts_all = np.tile(p, draws), np.tile(counts, draws)
    y = sample_rollouts(rng, p_all, counts_all)
    with_noise, _ = learner.gradient(y, counts_all, p_all, rng.standard_normal(y.size))
    without, _ = learner.gradient(y, counts_all, p_all, None)
    noise_part = (with_noise - without).reshape(draws, 2)
    mixed = 1 - 2 * 0.5 ** counts
    np.testing.assert_allclose(noise_part.var(axis=0), 4.0 * mixed / counts, rtol=0.05)


def test_step_direction_matches_a_naive_loop() -> None:
    learner = _learner(aggregation="rollout", interference=0.6, transfer=0.25)
    rng = np.random.default_rng(0)
    index = rng.choice(64, 10, replace=False)
    counts = rng.integers(2, 13, 10)
    g = rng.normal(size=10)
    m = rng.uniform(0.5, 3, 10)
    d_shared, d_K, u = learner.step_direction(index, counts, g, m, n_bar=4)
    cfg = learner.config
    K = cfg.num_groups
    h = np.zeros(K)
    for i in range(10):
        h[learner.world.group_P[index[i]]] += m[i] * counts[i] / 4 * g[i] / 10
    expected = np.zeros(K)
    for k in range(K):
        for j in range(K):
            off = (cfg.transfer - cfg.interference) / (K - 1)
            expected[k] += cfg.lr_group * (h[k] if j == k else off * h[j])
    np.testing.assert_allclose(d_K, expected, rtol=1e-12, atol=1e-15)
    assert d_shared == pytest.approx(cfg.lr_shared * np.sum(m * counts / 4 * g) / 10)


def test_interference_lowers_the_other_groups() -> None:
    learner = _learner(interference=1.0)
    group0 = np.flatnonzero(learner.world.group_P == 0)[:3]
    _, d_K, _ = learner.step_direction(group0, np.full(3, 4), np.ones(3), np.ones(3), 4)
    assert d_K[0] > 0 and np.all(d_K[1:] < 0)
    assert d_K.sum() == pytest.approx(0.0, abs=1e-12)  # kappa = 1: zero-sum


def test_group_sizes_heavy_tailed_and_exact() -> None:
    cfg = WorldConfig(num_prompts=14116, num_groups=32)
    sizes = group_sizes(cfg, np.random.default_rng(0))
    assert sizes.sum() == 14116 and sizes.min() >= 1
    assert sizes[0] > 20 * sizes[-1] / 1.5  # Zipf(1): the largest is ~32x the smallest
    pareto = group_sizes(WorldConfig(num_prompts=5000, num_groups=40, group_sizes="pareto", size_exponent=1.2),
                         np.random.default_rng(1))
    assert pareto.sum() == 5000 and pareto.min() >= 1


def test_world_is_seeded_and_difficulty_has_a_hard_tail() -> None:
    cfg = WorldConfig()
    a, b = make_world(cfg, np.random.default_rng(5)), make_world(cfg, np.random.default_rng(5))
    np.testing.assert_array_equal(a.difficulty_P, b.difficulty_P)
    d = a.difficulty_P - cfg.difficulty_offset
    assert np.mean(d) > 2 * np.median(d)  # right-skewed: many easy, long hard tail
    rare_hard = np.corrcoef(a.sizes_K, a.group_hardness_K)[0, 1]
    assert rare_hard < 0  # size_difficulty_corr > 0: rarer groups are harder


def test_batch_sampler_epochs_and_state() -> None:
    sampler = BatchSampler(100, 30, np.random.default_rng(0))
    first = np.concatenate([sampler.next() for _ in range(3)])
    assert np.unique(first).size == 90
    state = sampler.state_dict()
    ahead = [sampler.next() for _ in range(5)]
    sampler.load_state_dict(state)
    np.testing.assert_array_equal(np.concatenate(ahead), np.concatenate([sampler.next() for _ in range(5)]))


def test_bad_world_config_is_one_line_error() -> None:
    with pytest.raises(ConfigError, match="interference"):
        WorldConfig(interference=1.5)
    with pytest.raises(ConfigError, match="num_groups"):
        WorldConfig(num_prompts=100, num_groups=50)


def test_transfer_raises_the_other_groups_and_moves_them_in_its_direction() -> None:
    """A gain on group 0 alone: with transfer the other groups rise, more transfer raises them more."""
    gains = []
    for transfer in (0.0, 0.3, 0.9):
        learner = _learner(interference=0.0, transfer=transfer)
        group0 = np.flatnonzero(learner.world.group_P == 0)[:3]
        _, d_K, _ = learner.step_direction(group0, np.full(3, 4), np.ones(3), np.ones(3), 4)
        assert d_K[0] > 0
        gains.append(d_K[1:].mean())
    assert gains[0] == pytest.approx(0.0, abs=1e-15) and 0 < gains[1] < gains[2]
    # interference works the other way; equal knobs cancel.
    learner = _learner(interference=0.4, transfer=0.4)
    group0 = np.flatnonzero(learner.world.group_P == 0)[:3]
    _, d_K, _ = learner.step_direction(group0, np.full(3, 4), np.ones(3), np.ones(3), 4)
    np.testing.assert_allclose(d_K[1:], 0.0, atol=1e-15)


def test_step_price_matches_hand_computation_and_grows_quadratically() -> None:
    learner = _learner(interference=0.0, curvature=0.5, update_noise=0.0)
    index = np.array([0, 1, 2, 3])
    u = np.array([1.0, -2.0, 0.5, 3.0])
    d_shared, d_K = 0.01, np.array([0.1, -0.2, 0.0, 0.3])
    dz = d_shared + d_K[learner.world.group_P[index]] + learner.config.lr_prompt * u
    forgetting, rms = learner.step_price(d_shared, d_K, index, u)
    assert forgetting == pytest.approx(0.5 * np.mean(dz**2), rel=1e-12)
    assert rms == pytest.approx(np.sqrt(np.mean(dz**2)), rel=1e-12)
    before = learner.shared
    assert learner.apply(d_shared, d_K, index, u) == pytest.approx(forgetting)
    assert learner.shared == pytest.approx(before + d_shared - forgetting)
    doubled = _learner(interference=0.0, curvature=0.5, update_noise=0.0)
    doubled.lr_scale = 2.0
    twice, _ = doubled.step_price(2 * d_shared, 2 * d_K, index, u)
    assert twice == pytest.approx(4 * forgetting, rel=1e-12)


def test_update_noise_scales_with_the_step() -> None:
    index, u = np.array([0, 1]), np.array([1.0, 1.0])
    moves = []
    for scale in (1.0, 3.0):
        learner = _learner(interference=0.0, curvature=0.0, update_noise=1.0, lr_prompt=0.0)
        d_K = scale * np.array([0.1, 0.1, 0.1, 0.1])
        noise = np.array([1.0, -1.0, 0.5, 0.0])
        learner.apply(0.0, d_K, index, u, noise)
        moves.append(learner.group_skill_K - d_K)
    np.testing.assert_allclose(moves[1], 3 * moves[0], rtol=1e-12)
    np.testing.assert_allclose(moves[0], 0.1 * np.array([1.0, -1.0, 0.5, 0.0]), rtol=1e-12)


def test_heldout_groups_split_between_val_and_test_and_never_trained() -> None:
    cfg = WorldConfig(num_prompts=400, num_groups=8)
    world = make_world(cfg, np.random.default_rng(3))
    counts = np.bincount(world.heldout_group_H, minlength=8)
    assert np.all(counts >= 2 * 40)
    for k in range(8):  # every group's held-out prompts in one split only
        mine = world.heldout_split_H[world.heldout_group_H == k]
        assert np.all(mine == world.split_K[k])
    # groups paired by size, largest first: one of each pair in each split
    order = np.argsort(-world.sizes_K, kind="stable")
    assert all(world.split_K[order[i]] + world.split_K[order[i + 1]] == 1 for i in range(0, 8, 2))
    # the split is drawn per seed
    splits = {tuple(make_world(cfg, np.random.default_rng(s)).split_K) for s in range(6)}
    assert len(splits) > 1
    # 'prompts' (v2): alternate prompts of every group, and the very same held-out prompts either way
    old = make_world(WorldConfig(num_prompts=400, num_groups=8, heldout_split="prompts"), np.random.default_rng(3))
    np.testing.assert_array_equal(old.heldout_difficulty_H, world.heldout_difficulty_H)
    for k in range(8):
        mine = old.heldout_split_H[old.heldout_group_H == k]
        assert mine.sum() * 2 == mine.size
    # a world of one group cannot split groups: it falls back to the prompt split
    single = make_world(WorldConfig(num_prompts=400, num_groups=1), np.random.default_rng(0))
    assert single.heldout_split_H.sum() * 2 == single.heldout_split_H.size
    # The training pool does not depend on heldout_frac.
    plain = make_world(WorldConfig(num_prompts=400, num_groups=8, heldout_frac=0.0), np.random.default_rng(3))
    np.testing.assert_array_equal(plain.difficulty_P, world.difficulty_P)
    learner = Learner(cfg, world)
    learner.prompt_skill_P += 5.0  # memorisation only
    metrics = learner.evaluate()
    held = learner.heldout_prob()
    test = world.heldout_split_H == 1
    assert metrics["test/accuracy"] == pytest.approx(held[test].mean())
    assert metrics["memorisation_gap"] > 0.2
    assert metrics["val/accuracy"] == pytest.approx(held[~test].mean())
    val_groups = np.flatnonzero(world.split_K == 0)
    by_group = [held[world.heldout_group_H == k].mean() for k in val_groups]
    assert metrics["val/worst_group_accuracy"] == pytest.approx(min(by_group))  # over the val groups only


def test_unsolvable_fraction() -> None:
    cfg = WorldConfig(num_prompts=4000, num_groups=8, unsolvable_frac=0.4)
    learner = Learner(cfg, make_world(cfg, np.random.default_rng(0)))
    assert 0.35 < np.mean(learner.success_prob() < 1e-4) < 0.45


@pytest.mark.slow
def test_accuracy_against_learning_rate_is_unimodal_in_the_default_world() -> None:
    """GRPO's held-out accuracy rises then falls with the learning-rate scale (the step has a price)."""
    from simulators.loop import Simulation
    from simulators.simulator_config import SimConfig
    scores = []
    for lr in (0.125, 1.0, 8.0):
        values = []
        for seed in range(2):
            sim = Simulation(SimConfig(method="grpo", seed=seed, steps=150, batch=64, lr_scale=lr,
                                       snapshot_every=-1, world=WorldConfig(num_prompts=1500, num_groups=16)))
            for _ in range(150):
                sim.step(record=False)
            values.append(sim.evaluate()["test/accuracy"])
        scores.append(np.mean(values))
    assert scores[1] > scores[0] + 0.02 and scores[1] > scores[2] + 0.02
