"""The numbers of a `gdro train` step record that the trainer computes (not the controllers):
weighted advantages and the rows trained (real_runs/ppo.py), the actor's per-token means, response /
prompt lengths and throughputs (real_runs/step_scalars.py). Each against values written out by hand
or a loop over the rows (no model needed; these small functions are what mutation testing of the
training path covers: docs/mutation-testing.md)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from gdro_lab import StepFeedback  # noqa: E402
from real_runs import ppo, step_scalars  # noqa: E402
from real_runs.batching import RolloutBatch  # noqa: E402
from real_runs.config import load_config  # noqa: E402


def _batch(prompt_lengths, response_lengths, real_lengths) -> RolloutBatch:
    prompts = [[7] * n for n in prompt_lengths]
    responses = [[9] * n for n in response_lengths]
    lengths = np.array([p + r for p, r in zip(prompt_lengths, response_lengths)], np.int64)
    return RolloutBatch(prompts, responses, np.array(real_lengths, np.int64), lengths, np.zeros(len(prompts)), 0)


@pytest.mark.parametrize("overrides,ddof,clip,scale", [
    ((), 0, 5.0, 1.0),
    (("loss.adv_std=bessel", "loss.adv_scale=0.25", "loss.adv_clip=1.0"), 1, 1.0, 0.25),
])
def test_weighted_advantages_are_the_multiplier_times_clipped_grpo_times_the_scale(overrides, ddof, clip, scale):
    cfg = load_config("tiny-cpu", list(overrides))
    counts = np.array([3, 2, 4])
    rewards = np.array([1.0, -1.0, -1.0, 1.0, -1.0, 1.0, 1.0, 1.0, -1.0])
    feedback = StepFeedback(["a", "b", "c"], np.array([0, 1, 2]), counts, rewards, rewards > 0)
    multipliers = np.array([2.0, 0.5, 3.0])
    got, metrics = ppo.weighted_advantages(feedback, multipliers, cfg)
    want, start = [], 0
    for i, n in enumerate(counts):   # Eq. 3 group by group, then Eq. 16's multiplier and the scale
        group = rewards[start:start + n]
        std = np.sqrt(((group - group.mean()) ** 2).sum() / (n - ddof))
        want += [multipliers[i] * scale * float(np.clip((r - group.mean()) / (std + 1e-6), -clip, clip)) for r in group]
        start += n
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert isinstance(metrics, dict)


def test_actor_scalars_are_per_token_means_over_every_pass():
    batch = _batch([2, 3, 4], [3, 1, 2], [3, 0, 2])       # 5 real response tokens, the middle row empty
    sums = {"clip_frac": 4.0, "kl": 1.5, "entropy": 20.0}
    got = step_scalars.actor_scalars(batch, sums, [1.0, 3.0, 2.0], [0.5, 1.5], ppo_epochs=2, engine_gap=[0.1, 0.3, 0.2])
    assert got == {"actor/clip_frac": 0.4, "actor/kl": 0.15, "actor/entropy": 2.0, "actor/loss": 2.0,
                   "actor/grad_norm": 1.0, "actor/engine_logprob_gap_max": 0.3}
    nothing = step_scalars.actor_scalars(_batch([2], [1], [0]), {"kl": 0.0}, [0.0], [0.0], ppo_epochs=1, engine_gap=[])
    assert nothing == {"actor/kl": 0.0, "actor/loss": 0.0, "actor/grad_norm": 0.0, "actor/engine_logprob_gap_max": 0.0}


def test_rollout_scalars_count_real_tokens_prompt_tokens_and_truncations():
    batch = _batch([2, 5, 3, 6], [4, 1, 7, 2], [4, 0, 7, 2])
    got = step_scalars.rollout_scalars(batch, ["stop", "stop", "length", "length"])
    assert got == {"response/length_mean": 13 / 4, "response/length_max": 7.0, "response/length_min": 0.0,
                   "response/truncated_frac": 0.5, "prompt/length_mean": 4.0}
    assert step_scalars.rollout_scalars(batch, ["length", "stop", "stop", "stop"])["response/truncated_frac"] == 0.25


def test_perf_scalars_are_tokens_over_their_phase_seconds():
    generated = _batch([2, 5, 3], [4, 1, 7], [4, 0, 7])   # 22 tokens in all, 11 real response tokens
    trained = _batch([2, 3], [4, 7], [4, 7])              # 16 tokens trained per epoch
    seconds = {"time/step": 4.0, "time/controllers": 0.5, "time/generate": 2.0, "time/update": 0.5}
    got = step_scalars.perf_scalars(seconds, generated, trained, ppo_epochs=3)
    assert got == {"time/controllers_share": 0.125, "perf/tokens_per_s": 5.5, "perf/gen_tokens_per_s": 5.5,
                   "perf/train_tokens_per_s": 96.0}
    idle = step_scalars.perf_scalars({**seconds, "time/generate": 0.0, "time/update": 0.0}, generated, trained, 1)
    assert idle["perf/gen_tokens_per_s"] == 11 / 1e-9 and idle["perf/train_tokens_per_s"] == 16 / 1e-9


def test_on_policy_update_sees_every_kind_of_dropout():
    """The separate old-log-prob pass is skipped only without dropout: an nn.Dropout with p > 0 or
    any of the config's dropout fields > 0 keeps it; p = 0, fields at 0 or None, or a module with
    no config at all skip it."""
    import types

    import torch
    cfg = load_config("tiny-cpu", ["train.mini_batches=1", "train.ppo_epochs=1"])

    def model(p=None, **config):
        layers = [torch.nn.Linear(2, 2)] + ([torch.nn.Dropout(p)] if p is not None else [])
        module = torch.nn.Sequential(*layers)
        if config:
            module.config = types.SimpleNamespace(**config)
        return module

    assert ppo.on_policy_update(cfg, model())                       # no config attribute at all
    assert ppo.on_policy_update(cfg, model(0.0, attention_dropout=None, hidden_dropout=0.0))
    assert not ppo.on_policy_update(cfg, model(0.1))
    for name in ("attention_dropout", "hidden_dropout", "resid_pdrop", "dropout"):
        assert not ppo.on_policy_update(cfg, model(**{name: 0.1})), name


def test_trained_rows_keep_exactly_the_selected_groups_rows_in_order():
    """The rows the update trains on when the prompt selector drops groups: each kept row's prompt,
    response, lengths, advantage and engine log-probs, in the original order (a loop over the rows
    is the reference); keeping every row hands back the batch itself; keeping none gives an empty batch."""
    batch = _batch([2, 3, 4, 5, 6], [3, 1, 2, 4, 1], [3, 0, 2, 4, 1])
    batch.prompts = [[10 + r] * len(p) for r, p in enumerate(batch.prompts)]      # every row told apart
    batch.responses = [[20 + r] * len(t) for r, t in enumerate(batch.responses)]
    batch.advantages = np.array([0.5, -1.0, 2.0, -0.25, 1.5])
    batch.pad_id = 3
    engine = [np.full(n, -0.1 * (r + 1), np.float32) for r, n in enumerate([3, 0, 2, 4, 1])]
    keep = np.array([False, True, True, False, True])
    got, got_engine = ppo.trained_rows(batch, engine, keep)
    kept = [r for r in range(5) if keep[r]]
    assert got is not batch and got.pad_id == 3
    assert got.prompts == [batch.prompts[r] for r in kept]
    assert got.responses == [batch.responses[r] for r in kept]
    assert got.real_lengths.tolist() == [0, 2, 1] and got.lengths.tolist() == [4, 6, 7]
    assert got.advantages.tolist() == [-1.0, 2.0, 1.5]
    assert len(got_engine) == 3 and all(g is engine[r] for g, r in zip(got_engine, kept))
    same, same_engine = ppo.trained_rows(batch, engine, np.ones(5, bool))
    assert same is batch and same_engine is engine
    none, none_engine = ppo.trained_rows(batch, engine, np.zeros(5, bool))
    assert none.responses == [] and list(none_engine) == [] and len(none.advantages) == 0
