"""Prompt-GDRO behaviour: against a naive loop of Eq. 12-16, convergence, response to a shift."""

from __future__ import annotations

import numpy as np
import pytest

from gdro_lab.controllers.feedback import StepFeedback
from gdro_lab.controllers.prompt_gdro import PromptGDRO, UniformWeighter, WeighterConfig
from gdro_lab.controllers.signals import SIGNALS


def _feedback(rng, bins_P, fail_G, n=4):
    """Prompts in fixed bins; each rollout fails with the bin's failure probability."""
    counts = np.full(bins_P.size, n)
    success = rng.random(counts.sum()) >= np.repeat(fail_G[bins_P], counts)
    ids = [str(i) for i in range(bins_P.size)]
    return StepFeedback(ids, bins_P, counts, 2.0 * success - 1.0, success)


def _naive_weights(history, cfg):
    """Eq. 12-16 as a plain loop over steps and bins."""
    B = cfg.num_bins
    score = [0.0] * B
    seen = [False] * B
    for bins, signal in history:
        present = sorted(set(int(b) for b in bins if b >= 0))
        assigned = sum(1 for b in bins if b >= 0)
        for b in present:
            values = [s for s, g in zip(signal, bins) if g == b]
            x = sum(values) / len(values)
            if cfg.share_normalize:
                x = x / max(B * len(values) / assigned, cfg.share_floor)
            score[b] = x if not seen[b] else (1 - cfg.ema_beta) * score[b] + cfg.ema_beta * x
            seen[b] = True
    omega = [np.exp(cfg.eta * min(max(s, -cfg.clip), cfg.clip)) for s in score]
    q = [(1 - cfg.gamma) * w / sum(omega) + cfg.gamma / B for w in omega]
    return np.array(score), np.array(omega), np.array(q)


@pytest.mark.parametrize("mode", ["paper", "mean1"])
@pytest.mark.parametrize("normalize", [True, False])
def test_matches_naive_loop(mode, normalize):
    cfg = WeighterConfig(num_bins=5, weight_mode=mode, share_normalize=normalize, clip=2.0)
    controller = PromptGDRO(cfg, seed=0)
    rng = np.random.default_rng(1)
    history = []
    fail = np.array([0.9, 0.7, 0.5, 0.3, 0.1])
    for _ in range(30):
        bins = rng.choice(np.arange(-1, 4), size=40)  # bin 4 never present, some unassigned
        feedback = _feedback(rng, np.maximum(bins, 0), fail)
        feedback = StepFeedback(feedback.prompt_ids, bins, feedback.counts_P, feedback.rewards_R,
                                feedback.successes_R)
        controller.update(feedback)
        history.append((bins, SIGNALS["failure_rate"](feedback)))
    score, omega, q = _naive_weights(history, cfg)
    np.testing.assert_allclose(controller.score_G, score, rtol=1e-12)
    np.testing.assert_allclose(controller.omega(), omega, rtol=1e-12)
    np.testing.assert_allclose(controller.bin_weights(), q, rtol=1e-12)
    bins = np.array([0, 1, 2, 3, 4, -1, 2])
    m = controller.multipliers(bins)
    if mode == "paper":
        expected = np.minimum(omega[np.maximum(bins, 0)], cfg.max_weight)
    else:
        per = q[bins[bins >= 0]]
        expected = np.minimum(q[np.maximum(bins, 0)] / per.mean(), cfg.max_weight)
    expected[bins < 0] = 1.0
    np.testing.assert_allclose(m, expected, rtol=1e-12)


def test_converges_to_entropic_best_response():
    """Stationary bins: EMA scores -> true bin risks L_b, weights -> (1-g) softmax(eta L) + g/B (Lemma 4.1)."""
    fail = np.array([0.95, 0.8, 0.6, 0.4, 0.2, 0.05])
    cfg = WeighterConfig(num_bins=6, share_normalize=False, eta=3.0)
    controller = PromptGDRO(cfg, seed=0)
    rng = np.random.default_rng(2)
    bins = np.repeat(np.arange(6), 100)
    for _ in range(400):
        controller.update(_feedback(rng, bins, fail))
    np.testing.assert_allclose(controller.score_G, fail, atol=0.03)
    logits = cfg.eta * fail
    best = (1 - cfg.gamma) * np.exp(logits) / np.exp(logits).sum() + cfg.gamma / 6
    np.testing.assert_allclose(controller.bin_weights(), best, atol=0.02)


def test_moves_mass_to_a_bin_whose_signal_rises():
    fail = np.array([0.5, 0.5, 0.2, 0.5])
    controller = PromptGDRO(WeighterConfig(num_bins=4, eta=4.0), seed=0)
    rng = np.random.default_rng(3)
    bins = np.repeat(np.arange(4), 50)
    for _ in range(100):
        controller.update(_feedback(rng, bins, fail))
    before = controller.bin_weights()
    assert before[2] < before[[0, 1, 3]].min()
    fail[2] = 0.95
    for _ in range(100):
        controller.update(_feedback(rng, bins, fail))
    after = controller.bin_weights()
    assert after[2] > before[2] + 0.2
    assert after.argmax() == 2


def test_uniform_weighter_is_grpo():
    controller = UniformWeighter(WeighterConfig(num_bins=3), seed=0)
    rng = np.random.default_rng(0)
    bins = np.array([0, 1, 2, -1])
    controller.update(_feedback(rng, np.maximum(bins, 0), np.array([0.9, 0.5, 0.1])))
    np.testing.assert_array_equal(controller.multipliers(bins), np.ones(4))
    np.testing.assert_allclose(controller.bin_weights(), np.full(3, 1 / 3))


def test_surrogate_signal_is_zero_on_policy_and_uses_trainer_losses():
    rng = np.random.default_rng(4)
    counts = np.array([2, 5, 3, 4])
    success = rng.random(counts.sum()) < 0.5
    feedback = StepFeedback(list("abcd"), np.zeros(4, int), counts, 2.0 * success - 1, success)
    np.testing.assert_allclose(SIGNALS["surrogate"](feedback), 0.0, atol=1e-12)
    losses = rng.normal(size=counts.sum())
    with_losses = StepFeedback(list("abcd"), np.zeros(4, int), counts, 2.0 * success - 1, success,
                               losses_R=losses)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    expected = [losses[s:s + c].mean() for s, c in zip(starts, counts)]
    np.testing.assert_allclose(SIGNALS["surrogate"](with_losses), expected)


def test_reward_std_signal_peaks_at_half():
    counts = np.array([4, 4, 4])
    success = np.array([0, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 1], bool)
    feedback = StepFeedback(list("abc"), np.zeros(3, int), counts, 2.0 * success - 1, success)
    np.testing.assert_allclose(SIGNALS["reward_std"](feedback), [0.0, 1.0, 0.0])
    np.testing.assert_allclose(SIGNALS["failure_rate"](feedback), [1.0, 0.5, 0.0])


@pytest.mark.parametrize("normalize", [True, False])
def test_score_equals_the_array_rules_bit_for_bit(normalize):
    """update() applies debiased_signal and ema_from_first on lists of floats (their per-bin fast path): the score
    is the rules' on arrays bit for bit, absent and first-seen bins included."""
    from gdro_lab.functional.diagnostics import bin_mean, bin_share
    from gdro_lab.functional.update_rules import debiased_signal, ema_from_first

    cfg = WeighterConfig(num_bins=6, share_normalize=normalize)
    controller = PromptGDRO(cfg, seed=0)
    rng = np.random.default_rng(3)
    score = np.full(6, np.nan)
    for step in range(25):
        bins = rng.choice(np.arange(-1, 2 + min(step, 4)), size=30)  # bins first seen over the steps; bin 5 never
        feedback = _feedback(rng, np.maximum(bins, 0), np.linspace(0.9, 0.1, 6))
        feedback = StepFeedback(feedback.prompt_ids, bins, feedback.counts_P, feedback.rewards_R, feedback.successes_R)
        controller.update(feedback)
        observed = bin_mean(SIGNALS["failure_rate"](feedback), bins, 6)
        if normalize:
            observed = debiased_signal(observed, bin_share(bins, 6), cfg.share_floor)
        score = ema_from_first(score, observed, cfg.ema_beta)
        assert controller.score_G.tobytes() == np.where(np.isnan(score), 0.0, score).tobytes()
        assert controller.seen_G.tolist() == np.isfinite(score).tolist()
