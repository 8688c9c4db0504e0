"""Invariants of `gdro train` whose breakage changes results without any error.

Each test is named after the behaviour and was checked to FAIL with the matching bug planted:

- Prompt-GDRO multiplies each prompt's GRPO *advantages* by its multiplier (Eq. 16). Planted bug:
  multipliers applied to the rewards before ``grpo_advantages`` (normalisation undoes them, so
  Prompt-GDRO silently becomes GRPO).
- The multi-step PPO update (2 mini-batches x 2 epochs) uses the STORED old log-probs. Planted bug:
  old log-probs replaced by the current ones (ratio always 1, clip fraction 0).
- The response mask covers exactly the generated tokens, the last one (EOS) included. Planted
  bug: mask shifted by one (the last token never trained; 1-token responses get no gradient).
- The ``hf`` engine samples from softmax(logits / T). Planted bug: temperature not applied.
- The frozen reference model never changes during training. Planted bug: the reference
  overwritten by the policy every step.

References are independent of the code under test: a full forward pass of the plain
``transformers`` model over each [prompt, response] (no padding, no gathering), the loss written
out per token, GRPO advantages by a loop over groups, a chi-square test against the softmax.
"""

from __future__ import annotations

import copy
import json
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
stats = pytest.importorskip("scipy.stats")

from gdro_lab import step as core_step  # noqa: E402
from real_runs import ppo, train  # noqa: E402
from real_runs.batching import RolloutBatch  # noqa: E402
from real_runs.config import load_config  # noqa: E402
from real_runs.engines.hf import HFEngine  # noqa: E402
from real_runs.models import load_policy  # noqa: E402
from real_runs.types import Problem, RewardResult, Rollouts, SamplingParams  # noqa: E402

RECORDS = [Problem(f"toy:train:{i}", f"Say something {i}.", "0", "toy", "toy") for i in range(8)]


def tiny(out: Path, *overrides: str):
    """The tiny-cpu preset on toy prompts: no data files, no evaluation, no checkpoints."""
    return load_config("tiny-cpu", [f"train.out={json.dumps(str(out))}", "train.progress=false",
                                    "eval.every=0", "train.save_every=0", "rollout.max_new_tokens=4", *overrides])


class PatternReward:
    """+1 / -1 by position in the step's flat batch: every group of 4 is mixed, with different
    means, whatever the model writes."""

    PATTERN = np.array([1, -1, -1, -1, 1, 1, -1, -1, -1, 1, 1, 1, 1, -1, 1, -1], float)

    def score(self, responses, answers):
        rewards = np.resize(self.PATTERN, len(responses))
        return RewardResult(rewards, rewards > 0, {})


def full_forward_logprobs(model, prompt: list[int], response: list[int]) -> torch.Tensor:
    """log pi(y_t | x, y_<t) from one unpadded forward pass of the whole sequence (the reference)."""
    logits = model(torch.tensor([prompt + response])).logits[0].double()
    logp = torch.log_softmax(logits, -1)
    return torch.stack([logp[len(prompt) - 1 + t, token] for t, token in enumerate(response)])


def prompts_and_tokens(seed: int, lengths: list[int]) -> tuple[list[list[int]], list[list[int]]]:
    rng = np.random.default_rng(seed)
    prompts = [rng.integers(5, 200, size=int(rng.integers(2, 6))).tolist() for _ in lengths]
    return prompts, [rng.integers(5, 200, size=n).tolist() for n in lengths]


def ragged_batch(seed: int, lengths: list[int], advantages: list[float]) -> RolloutBatch:
    """A RolloutBatch built by the trainer's own ``from_rollouts`` (one prompt per sample)."""
    prompts, tokens = prompts_and_tokens(seed, lengths)
    rollouts = Rollouts(np.ones(len(lengths), np.int64), prompts, tokens,
                        [np.zeros(n, np.float32) for n in lengths], [""] * len(lengths), ["stop"] * len(lengths))
    return RolloutBatch.from_rollouts(rollouts, np.array(advantages), pad_id=0)


# ----------------------------------------------------------------------------- Prompt-GDRO multipliers

class FixedWeighter:
    """A Prompt-GDRO stand-in with fixed per-prompt multipliers; records the feedback it sees."""

    MULTIPLIERS = np.array([1.0, 3.0, 0.5, 8.0])

    def __init__(self, num_bins: int):
        self.num_bins, self.feedback = num_bins, []

    def update(self, feedback):
        self.feedback.append(feedback)
        return {}

    def multipliers(self, bins_P):
        return self.MULTIPLIERS[:len(bins_P)].copy()

    def bin_weights(self):
        return np.full(self.num_bins, 1.0 / self.num_bins)

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def grpo_by_loop(rewards_R, counts_P, clip: float, ddof: int) -> np.ndarray:
    """Eq. 3 group by group: (r - mean) / (std + 1e-6), clipped to +-clip."""
    out, start = [], 0
    for n in counts_P:
        group = np.asarray(rewards_R[start:start + n], float)
        std = np.sqrt(((group - group.mean()) ** 2).sum() / (n - ddof))
        out += [float(np.clip((r - group.mean()) / (std + 1e-6), -clip, clip)) for r in group]
        start += n
    return np.array(out)


@pytest.mark.parametrize("extra,ddof,scale", [((), 0, 1.0), (("loss.adv_std=bessel", "loss.adv_scale=0.5"), 1, 0.5)])
def test_prompt_gdro_scales_each_prompts_grpo_advantages_by_its_multiplier(tmp_path: Path, monkeypatch, extra,
                                                                          ddof, scale):
    """Through train.main: the advantages the update receives are m_i x A_ij (Eq. 16), A_ij being
    plain GRPO's of the rewards (multipliers [1, 3, 0.5, 8])."""
    torch.set_num_threads(1)
    weighters: list[FixedWeighter] = []
    seen: list[np.ndarray] = []
    build, update = core_step.build, ppo.ppo_update
    cfg = tiny(tmp_path, "method.name=prompt_gdro", "train.steps=2", "train.mini_batches=1", *extra)

    def fake_build(family, name, config=None, seed=None, **kwargs):
        if family == "weighter":
            weighters.append(FixedWeighter(cfg.method.num_bins))
            return weighters[-1]
        return build(family, name, config, seed, **kwargs)

    def recording_update(batch, *args, **kwargs):
        seen.append(batch.advantages.copy())
        return update(batch, *args, **kwargs)

    monkeypatch.setattr(core_step, "build", fake_build)
    monkeypatch.setattr(ppo, "ppo_update", recording_update)
    train.main(cfg, train_records=RECORDS, reward=PatternReward())
    feedback = weighters[0].feedback
    assert len(seen) == len(feedback) == 2
    for advantages_R, fb in zip(seen, feedback):
        counts = np.asarray(fb.counts_P)
        plain = grpo_by_loop(fb.rewards_R, counts, clip=5.0, ddof=ddof) * scale
        want = plain * np.repeat(FixedWeighter.MULTIPLIERS, counts)
        np.testing.assert_allclose(advantages_R, want, rtol=1e-12, atol=1e-12)
        assert np.abs(want - plain).max() > 1.0          # the multipliers matter in this batch


# ----------------------------------------------------------------------------- stored old log-probs

def reference_ppo(model, batch: RolloutBatch, old_logp: list[torch.Tensor], cfg, step: int) -> list[float]:
    """The PPO update written out: for each epoch and mini-batch (the trainer's documented seeded
    shuffle), token-mean of max(-A rho, -A clip(rho)) (dual clip at -A c for A < 0) with rho from
    the STORED old log-probs, one SGD step (Adam would magnify float32-vs-float64 differences of
    near-zero gradients). Returns the loss of each mini-batch."""
    tc, lc = cfg.train, cfg.loss
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.optim.lr)
    losses = []
    for epoch in range(tc.ppo_epochs):
        order = np.random.default_rng([tc.seed, step, epoch]).permutation(len(batch.responses))
        for mini in np.array_split(order, tc.mini_batches):
            optimizer.zero_grad()
            tokens = sum(int(batch.real_lengths[r]) for r in mini)
            total = torch.zeros((), dtype=torch.float64)
            for r in mini:
                n = int(batch.real_lengths[r])
                logp = full_forward_logprobs(model, batch.prompts[r], batch.responses[r][:n])
                ratio = torch.exp(logp - old_logp[r][:n].double())
                a = float(batch.advantages[r])
                per_token = torch.maximum(-a * ratio, -a * ratio.clamp(1 - lc.clip_low, 1 + lc.clip_high))
                if a < 0:
                    per_token = torch.minimum(per_token, torch.full_like(per_token, -a * lc.clip_ratio_c))
                total = total + per_token.sum() / tokens
            total.backward()
            optimizer.step()
            losses.append(float(total.detach()))
    return losses


def test_multi_step_ppo_update_uses_the_stored_old_logprobs(tmp_path: Path):
    """2 mini-batches x 2 epochs (4 optimizer steps): losses and parameters equal a written-out
    PPO whose ratio is taken against the log-probs stored before the update, and tokens clip."""
    torch.set_num_threads(1)
    cfg = tiny(tmp_path, "train.mini_batches=2", "train.ppo_epochs=2", "optim.lr=0.1", "optim.grad_clip=0",
               "loss.kl_coef=0")
    policy, _ = load_policy("tiny", seed=3)
    reference_model = copy.deepcopy(policy)
    advantages = 50 * np.array([1.5, -0.5, 0.7, -1.2, 0.3, -0.8, 1.1, -1.6])     # large steps: ratios leave the band
    batch = ragged_batch(0, [3, 1, 4, 2, 5, 1, 3, 2], advantages.tolist())
    with torch.no_grad():
        ppo.recompute_logprobs(batch, policy, None, 4096, [np.zeros(n) for n in batch.real_lengths], old=True)
    stored = [t.clone() for t in batch.old_logp]
    optimizer = torch.optim.SGD(policy.parameters(), lr=cfg.optim.lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    sums, losses, _, _ = ppo.ppo_update(batch, policy, optimizer, scheduler, cfg, 1, nullcontext)
    want = reference_ppo(reference_model, batch, stored, cfg, 1)
    assert len(losses) == 4
    np.testing.assert_allclose(losses, want, rtol=1e-4, atol=1e-6)
    for (name, got), expected in zip(policy.named_parameters(), reference_model.parameters()):
        torch.testing.assert_close(got, expected, atol=2e-5, rtol=1e-4, msg=name)
    assert sums["clip_frac"] > 0                       # ratios left the clip band after the first step


# ----------------------------------------------------------------------------- response mask

def test_response_mask_covers_exactly_the_generated_tokens_including_a_one_token_response():
    """from_rollouts + forward: mask row sums = real lengths (1, 3, 0 for an empty response, 5),
    ones on the first len positions only, the last (EOS) position included."""
    model, _ = load_policy("tiny", seed=1)
    batch = ragged_batch(1, [1, 3, 0, 5], [1.0, -1.0, 0.5, 2.0])
    prompts, tokens = prompts_and_tokens(1, [1, 3, 0, 5])
    rows = np.arange(4)
    with torch.no_grad():
        logp, mask, _ = batch.forward(model, rows)
        want = (np.arange(5)[None, :] < np.array([1, 3, 0, 5])[:, None]).astype(float)
        np.testing.assert_array_equal(mask.numpy(), want)
        for r, n in enumerate([1, 3, 0, 5]):
            if n:
                full = full_forward_logprobs(model, prompts[r], tokens[r])
                np.testing.assert_allclose(logp[r, :n].numpy(), full.numpy(), atol=1e-5)


@pytest.mark.parametrize("stored_old", [False, True], ids=["on-policy", "stored-old"])
def test_every_response_token_gets_its_gradient_including_the_last_and_a_single_one(tmp_path: Path, stored_old):
    """One SGD step (lr 1, no clipping, no KL) through ppo_update moves the parameters by exactly
    -grad of (1/N) sum_bt -A_b log pi(y_bt) (the ratio is 1 at the start): every token, the last
    included, and a 1-token response (checked on its own too)."""
    torch.set_num_threads(1)
    cfg = tiny(tmp_path, "train.mini_batches=1", "optim.grad_clip=0", "loss.kl_coef=0")
    for lengths, advantages in (([1, 2, 0, 4], [0.7, -1.3, 0.4, 2.0]), ([1], [1.0])):
        policy, _ = load_policy("tiny", seed=4)
        reference_model = copy.deepcopy(policy)
        batch = ragged_batch(2, lengths, advantages)
        if stored_old:
            with torch.no_grad():
                ppo.recompute_logprobs(batch, policy, None, 4096, [np.zeros(n) for n in lengths], old=True)
        optimizer = torch.optim.SGD(policy.parameters(), lr=1.0)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
        _, _, norms, _ = ppo.ppo_update(batch, policy, optimizer, scheduler, cfg, 1, nullcontext)
        loss = sum(-a * full_forward_logprobs(reference_model, batch.prompts[r], batch.responses[r][:n]).sum()
                   for r, (n, a) in enumerate(zip(lengths, advantages)) if n) / sum(lengths)
        loss.backward()
        assert norms[0] > 1e-3
        for (name, moved), (_, before) in zip(policy.named_parameters(), reference_model.named_parameters()):
            torch.testing.assert_close(before.detach() - moved.detach(), before.grad.float(), atol=1e-5, rtol=1e-4,
                                       msg=name)


# ----------------------------------------------------------------------------- sampling temperature

def _chi_square(samples: np.ndarray, probs: np.ndarray) -> float:
    """p-value of Pearson's chi-square of token counts against probs (bins with < 10 expected pooled)."""
    counts = np.bincount(samples, minlength=probs.size)
    expected = samples.size * probs
    big = expected >= 10
    observed = np.append(counts[big], counts[~big].sum())
    expected = np.append(expected[big], expected[~big].sum())
    return float(stats.chisquare(observed, expected).pvalue)


def test_hf_engine_samples_follow_softmax_of_logits_over_temperature():
    """2,000 seeded one-token samples at T = 0.3 and T = 1.0 from a tiny model with a peaked
    next-token distribution: each passes a chi-square test against softmax(logits / T) (p > 1e-6;
    the seed is fixed, so the outcome is too) and fails it against the other temperature
    (p < 1e-30), and the two sample sets differ under the same seed."""
    torch.set_num_threads(1)
    model, tokenizer = load_policy("tiny", seed=0)
    model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach() * 4.0)   # logits std ~3
    prompt = "Say 7"
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, -1].double()
    engine = HFEngine(model, tokenizer)
    samples = {}
    for temperature in (0.3, 1.0):
        rollouts = engine.generate([prompt], np.array([2000]), SamplingParams(
            temperature=temperature, top_p=1.0, top_k=0, max_new_tokens=1, seed=11))
        assert [len(t) for t in rollouts.token_ids] == [1] * 2000
        samples[temperature] = np.array([t[0] for t in rollouts.token_ids])
    for temperature, other in ((0.3, 1.0), (1.0, 0.3)):
        assert _chi_square(samples[temperature], torch.softmax(logits / temperature, -1).numpy()) > 1e-6
        assert _chi_square(samples[temperature], torch.softmax(logits / other, -1).numpy()) < 1e-30
    assert np.mean(samples[0.3] != samples[1.0]) > 0.2


# ----------------------------------------------------------------------------- frozen reference

@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory):
    """3 steps of train.main at the default 2 mini-batches, KL on, a large lr: what the update saw."""
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("recorded")
    seen: list[dict] = []
    update, recompute = ppo.ppo_update, ppo.recompute_logprobs
    references: list = []

    def recording_update(batch, policy, *args, **kwargs):
        seen.append({"prompts": batch.prompts, "responses": batch.responses, "real": batch.real_lengths.copy(),
                     "ref": [t.clone() for t in batch.ref_logp]})
        return update(batch, policy, *args, **kwargs)

    def recording_recompute(batch, policy, reference, *args, **kwargs):
        references.append((reference, policy))
        return recompute(batch, policy, reference, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ppo, "ppo_update", recording_update)
        patch.setattr(ppo, "recompute_logprobs", recording_recompute)
        cfg = tiny(out, "train.steps=3", "train.mini_batches=2", "train.ppo_epochs=2", "optim.lr=3e-2",
                   "loss.kl_coef=0.05", "train.prompts_per_step=4")
        run_dir = train.main(cfg, train_records=RECORDS, reward=PatternReward())
    rows = [json.loads(line)["scalars"] for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    return seen, references, rows


def test_reference_model_never_changes_during_training(recorded_run):
    """The reference log-probs of every step are the INITIAL model's (a fresh copy of the seed-0
    tiny model, full forward pass), the reference module's weights end equal to them, and it is
    never the policy, which did move (KL > 0 from step 2 on)."""
    seen, references, rows = recorded_run
    initial, _ = load_policy("tiny", seed=0)
    assert len(seen) == 3
    for step in seen:
        for prompt, response, n, ref in zip(step["prompts"], step["responses"], step["real"], step["ref"]):
            if n:
                want = full_forward_logprobs(initial, prompt, response[:n]).float()
                torch.testing.assert_close(ref[:n], want, atol=2e-5, rtol=1e-5)
    reference, policy = references[-1]
    assert reference is not policy and all(r is reference for r, _ in references)
    for (name, value), (_, want) in zip(reference.state_dict().items(), initial.state_dict().items()):
        assert torch.equal(value, want), name
    assert all(row["actor/kl"] > 1e-6 for row in rows[1:])


def test_trainer_default_multi_step_update_clips(recorded_run):
    """End to end at the default 2 mini-batches (x 2 epochs, large lr): the clip fraction is > 0
    every step, which it cannot be if the ratio is taken against the current log-probs."""
    _, _, rows = recorded_run
    assert all(row["actor/clip_frac"] > 0.01 for row in rows), [row["actor/clip_frac"] for row in rows]
