"""gdro_lab.functional.grpo.grpo_advantages against the installed verl's compute_grpo_outcome_advantage."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs these)")
import torch  # noqa: E402
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage  # noqa: E402

from gdro_lab.functional.grpo import grpo_advantages  # noqa: E402

HAS_SINGLETON = "singleton" in inspect.signature(grpo_advantages).parameters


def _verl(rewards_R, counts_P, normalize_std=True):
    """verl's advantage of each flat rollout (groups by a uid per prompt; one token per response)."""
    uids = np.repeat([f"p{i}" for i in range(len(counts_P))], counts_P).astype(object)
    scores = torch.as_tensor(np.asarray(rewards_R, np.float32))[:, None]
    adv, _ = compute_grpo_outcome_advantage(scores, torch.ones_like(scores), uids,
                                            norm_adv_by_std_in_grpo=normalize_std)
    return adv[:, 0].double().numpy()


def _cases():
    rng = np.random.default_rng(0)
    for trial in range(30):
        counts = rng.integers(1 if trial % 2 else 2, 9, size=int(rng.integers(1, 12)))
        binary = rng.choice([-1.0, 1.0], size=int(counts.sum()))
        yield counts, binary
        yield counts, np.round(rng.normal(size=int(counts.sum())), 3)  # continuous scores


@pytest.mark.parametrize("normalize_std", [True, False])
def test_bessel_groups_of_two_or_more_match_verl(normalize_std):
    checked = 0
    for counts, rewards in _cases():
        if counts.min() < 2:
            continue
        ours, _ = grpo_advantages(rewards.astype(np.float32), counts, std="bessel", normalize_std=normalize_std)
        np.testing.assert_allclose(ours, _verl(rewards, counts, normalize_std), rtol=1e-5, atol=1e-5)
        checked += 1
    assert checked >= 10


@pytest.mark.skipif(not HAS_SINGLETON, reason="gdro_lab.functional.grpo.grpo_advantages has no singleton parameter yet")
@pytest.mark.parametrize("normalize_std", [True, False])
def test_singleton_verl_matches_verl_on_ragged_groups_with_singletons(normalize_std):
    singles = 0
    for counts, rewards in _cases():
        singles += int(np.sum(counts == 1))
        ours, _ = grpo_advantages(rewards.astype(np.float32), counts, std="bessel", singleton="verl",
                                  normalize_std=normalize_std)
        np.testing.assert_allclose(ours, _verl(rewards, counts, normalize_std), rtol=1e-5, atol=1e-5)
    assert singles > 10


@pytest.mark.skipif(not HAS_SINGLETON, reason="gdro_lab.functional.grpo.grpo_advantages has no singleton parameter yet")
def test_zero_singleton_differs_from_verl_where_expected():
    counts, rewards = np.array([1, 3]), np.array([1.0, 1.0, -1.0, 1.0])
    ours, _ = grpo_advantages(rewards, counts, std="bessel", singleton="zero")
    theirs = _verl(rewards, counts)
    assert ours[0] == 0.0 and theirs[0] == pytest.approx(1.0, abs=1e-5)  # verl keeps the raw score
    np.testing.assert_allclose(ours[1:], theirs[1:], rtol=1e-5)
