"""The vllm engine's seeds, in pure Python (no vLLM needed): every rollout of a call has its own
seed, so a group's rollouts differ; a call whose rollouts would share a seed is refused.

vLLM draws the k-th sample of a request with ``n`` samples and seed s using seed s + k (its
``ParentRequest._get_child_sampling_params`` in ``vllm/v1/engine/parallel_sampling.py``), one
``torch.Generator`` per seeded request. The sampling test below draws each rollout from such a
generator over a fixed next-token distribution: the stand-in for vLLM's seeded sampler, not vLLM.
With vLLM importable, ``test_engine_vllm.py`` checks the seeds on vLLM's own ``SamplingParams``.
"""

from __future__ import annotations

import numpy as np
import pytest

from real_runs.engines.vllm import SEED_STRIDE, check_rollout_seeds, prompt_seeds, rollout_seeds


@pytest.mark.parametrize("step", range(20))
def test_every_rollout_of_a_paper_step_has_its_own_seed(step: int):
    """256 prompts with ragged counts in 2..12 (a Rollout-GDRO plan), the trainer's step seeds."""
    counts_P = np.random.default_rng(step).integers(2, 13, size=256)
    seed = step + 1   # the trainer's train.seed * 1_000_003 + step, at train.seed 0
    groups = rollout_seeds(seed, counts_P)
    flat = [s for group in groups for s in group]
    assert len(flat) == counts_P.sum() and len(set(flat)) == len(flat)
    assert all(isinstance(s, int) and 0 <= s < 2**31 for s in flat)
    for i, group in enumerate(groups):   # vLLM's rule: the k-th sample of request i has seed s_i + k
        assert group == [prompt_seeds(seed, 256)[i] + k for k in range(counts_P[i])]
    assert rollout_seeds(seed, counts_P) == groups   # a function of (seed, plan) only
    check_rollout_seeds(seed, counts_P.tolist())


def test_a_prompts_seeds_do_not_depend_on_the_other_prompts():
    a = rollout_seeds(7, [2, 12, 4])
    b = rollout_seeds(7, [12, 12, 3])
    assert a[1] == b[1] and a[0] == b[0][:2] and a[2] == b[2] + [b[2][-1] + 1]
    assert rollout_seeds(8, [4])[0] != rollout_seeds(7, [4])[0]
    assert rollout_seeds(None, [2, 3]) == [[None, None], [None, None, None]]   # unseeded: vLLM's own entropy


def _sample(seed: int, length: int = 16) -> tuple[int, ...]:
    """One rollout from a per-request generator seeded with ``seed`` over a fixed 50-token softmax."""
    import torch
    probs = torch.softmax(torch.linspace(0.0, 2.0, 50), dim=0)
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.multinomial(probs, length, replacement=True, generator=generator).tolist())


def test_a_groups_rollouts_differ_and_alike_seeds_would_make_them_identical():
    pytest.importorskip("torch")
    counts_P = [12, 4, 2]
    for group in rollout_seeds(123, counts_P):
        rollouts = [_sample(s) for s in group]
        assert len(set(rollouts)) == len(rollouts)
    # the trap the rule avoids: every request of a group seeded alike -> identical rollouts, advantages 0
    alike = [_sample(prompt_seeds(123, 1)[0]) for _ in range(4)]
    assert len(set(alike)) == 1
    rewards = np.array([float(sum(r) % 2) for r in alike])
    assert np.all(rewards - rewards.mean() == 0)


def test_a_call_whose_rollouts_would_share_a_seed_is_refused():
    with pytest.raises(ValueError, match=f"at most {SEED_STRIDE} samples per prompt"):
        check_rollout_seeds(1, [2, SEED_STRIDE + 1])
    with pytest.raises(ValueError, match="prompts per call"):
        check_rollout_seeds(1, [1] * (2**31 // SEED_STRIDE + 1))
    check_rollout_seeds(None, [SEED_STRIDE + 1])   # unseeded: nothing to collide
    check_rollout_seeds(1, [SEED_STRIDE, SEED_STRIDE])


def test_the_refusal_catches_a_rule_that_seeds_alike(monkeypatch: pytest.MonkeyPatch):
    """Planted: a prompt_seeds that gives every prompt the same seed (prompts' sample blocks overlap)."""
    from real_runs.engines import vllm as engine
    monkeypatch.setattr(engine, "prompt_seeds", lambda seed, num: [seed] * num)
    with pytest.raises(ValueError, match="share a seed"):
        engine.check_rollout_seeds(5, [4, 4])
