"""`ppo_update` and `recompute_logprobs` of real_runs/ppo.py against a per-token reference.

The reference is written out here, independent of the code under test: one unpadded forward pass
of the plain model per [prompt, response] (no padding, no micro-batches, no gathering), the
clipped surrogate, the KL estimator k2 and the entropy bonus per token in float64, the token mean
over the mini-batch, and its gradient by autograd. The update runs with several micro-batches
(a small token budget) and an empty response, so every number it passes on (token counts, KL
coefficient and estimator, entropy bonus and its gradient, metric sums, engine gaps) is checked.
Mutation testing of the update (then in train.py) found these wirings unchecked (docs/mutation-testing.md).
"""

from __future__ import annotations

import copy
from contextlib import nullcontext

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from real_runs import ppo  # noqa: E402
from real_runs.batching import RolloutBatch  # noqa: E402
from real_runs.config import load_config  # noqa: E402
from real_runs.models import load_policy  # noqa: E402

REAL = [3, 1, 0, 4, 2, 3]                         # generated tokens per sample; sample 2 generated nothing
ADVANTAGES = [1.5, -0.5, 0.7, -1.2, 0.3, -0.8]


def _batch(seed: int = 0) -> RolloutBatch:
    rng = np.random.default_rng(seed)
    prompts = [rng.integers(5, 200, size=int(rng.integers(2, 5))).tolist() for _ in REAL]
    responses = [rng.integers(5, 200, size=n).tolist() if n else [0] for n in REAL]   # empty -> one pad token
    return RolloutBatch(prompts, responses, np.array(REAL), np.array([len(p) + len(r) for p, r in zip(prompts, responses)]),
                        np.array(ADVANTAGES), pad_id=0)


def _full_forward(model, prompt: list[int], response: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(log pi(y_t | x, y_<t), entropy H_t) over the response, one unpadded pass, float64."""
    logits = model(torch.tensor([prompt + response])).logits[0, len(prompt) - 1:len(prompt) - 1 + len(response)]
    logp = torch.log_softmax(logits.double(), -1)
    return logp[torch.arange(len(response)), torch.tensor(response, dtype=torch.long)], -(logp.exp() * logp).sum(-1)


def _cfg(*overrides: str):
    return load_config("tiny-cpu", ["train.progress=false", "train.micro_batch_tokens=8", *overrides])


def test_ppo_update_loss_gradient_and_metric_sums_equal_the_per_token_reference():
    """Stored old log-probs (ratios away from 1: clipped and dual-clipped tokens), k2 KL to fixed
    reference log-probs, an entropy bonus of 0.5, token-mean over the mini-batch's real tokens,
    micro-batches of <= 8 tokens: the loss, every parameter's gradient (SGD, lr 1, no clipping),
    the gradient norm and the token sums of clip, KL and entropy equal the reference's."""
    torch.manual_seed(0)
    cfg = _cfg("train.mini_batches=1", "train.ppo_epochs=1", "loss.agg=token-mean", "loss.kl_coef=0.3",
               "loss.kl_estimator=k2", "loss.entropy_coef=0.5", "optim.grad_clip=0")
    lc = cfg.loss
    model, _ = load_policy("tiny", seed=1)
    reference_model = copy.deepcopy(model)
    batch = _batch()
    rng = np.random.default_rng(1)
    with torch.no_grad():
        current = [_full_forward(model, p, r[:n])[0] for p, r, n in zip(batch.prompts, batch.responses, REAL)]
    batch.old_logp = [torch.cat([c + torch.as_tensor(rng.normal(0, 1.2, n)), torch.zeros(1 - min(n, 1))]).float()
                      for c, n in zip(current, REAL)]          # the empty sample keeps one (masked) entry
    batch.ref_logp = [torch.cat([c + torch.as_tensor(rng.normal(0, 0.3, n)), torch.zeros(1 - min(n, 1))]).float()
                      for c, n in zip(current, REAL)]

    total, sums = torch.zeros((), dtype=torch.float64), {"clip_frac": 0.0, "dual_clip_frac": 0.0, "kl": 0.0,
                                                         "entropy": 0.0}
    for p, r, n, a, old, ref in zip(batch.prompts, batch.responses, REAL, ADVANTAGES, batch.old_logp, batch.ref_logp):
        if not n:
            continue
        logp, entropy = _full_forward(reference_model, p, r[:n])
        ratio = torch.exp(torch.clamp(logp - old[:n].double(), -20, 20))
        unclipped, clipped = -a * ratio, -a * torch.clamp(ratio, 1 - lc.clip_low, 1 + lc.clip_high)
        token = torch.maximum(unclipped, clipped)
        dual = (token > -a * lc.clip_ratio_c) if a < 0 else torch.zeros(n, dtype=torch.bool)
        token = torch.where(dual, torch.full_like(token, -a * lc.clip_ratio_c), token)
        kl = 0.5 * (ref[:n].double() - logp) ** 2
        total = total + (token + lc.kl_coef * kl - lc.entropy_coef * entropy).sum()
        sums["clip_frac"] += float((clipped > unclipped).sum())
        sums["dual_clip_frac"] += float(dual.sum())
        sums["kl"] += float(kl.detach().sum())
        sums["entropy"] += float(entropy.detach().sum())
    want_loss = total / sum(REAL)
    want_loss.backward()
    want_grads = {name: p.grad.clone() for name, p in reference_model.named_parameters()}
    want_norm = float(torch.sqrt(sum((g.double() ** 2).sum() for g in want_grads.values())))
    assert 0 < sums["clip_frac"] < sum(REAL) and sums["dual_clip_frac"] > 0     # both clips reached

    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    got_sums, losses, norms, gaps = ppo.ppo_update(batch, model, optimizer,
                                                     torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0),
                                                     cfg, 1, nullcontext)
    assert losses == [pytest.approx(float(want_loss.detach()), rel=1e-5)]
    assert norms == [pytest.approx(want_norm, rel=1e-4)] and gaps == []
    for name, p in model.named_parameters():
        torch.testing.assert_close(before[name] - p.detach(), want_grads[name], atol=1e-6, rtol=1e-4, msg=name)
    for key, value in sums.items():
        assert got_sums[key] == pytest.approx(value, rel=1e-5, abs=1e-6), key


def test_ppo_update_seq_mean_of_a_mini_batch_with_one_nonempty_response_is_that_responses_mean():
    """seq-mean-token-mean counts only non-empty responses: with one response of 3 tokens beside an
    empty one, the on-policy loss (ratio 1) is -A of that response, not half of it."""
    cfg = _cfg("train.mini_batches=1", "train.ppo_epochs=1", "loss.agg=seq-mean-token-mean", "loss.kl_coef=0")
    model, _ = load_policy("tiny", seed=0)
    batch = RolloutBatch([[11, 12], [13, 14, 15]], [[21, 22, 23], [0]], np.array([3, 0]), np.array([5, 4]),
                         np.array([0.8, -2.0]), pad_id=0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    _, losses, _, _ = ppo.ppo_update(batch, model, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0),
                                       cfg, 1, nullcontext)
    assert losses == [pytest.approx(-0.8, rel=1e-6)]


def _engine_logprobs(model, batch: RolloutBatch) -> tuple[list[np.ndarray], list[float]]:
    """The policy's own log-probs with row r's last token moved by 0.01 (r + 1): the gap of row r."""
    engine, want = [], []
    with torch.no_grad():
        for r, (p, resp, n) in enumerate(zip(batch.prompts, batch.responses, batch.real_lengths)):
            logp = _full_forward(model, p, resp[:n])[0].numpy().astype(np.float32)
            if n:
                logp[-1] += 0.01 * (r + 1)
                want.append(0.01 * (r + 1))
            engine.append(logp)
    return engine, want


def test_on_policy_update_measures_the_engine_gap_of_every_nonempty_response_in_every_micro_batch():
    cfg = _cfg("train.mini_batches=1", "train.ppo_epochs=1", "loss.kl_coef=0")
    model, _ = load_policy("tiny", seed=0)
    batch = _batch()
    engine, want = _engine_logprobs(model, batch)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    _, _, _, gaps = ppo.ppo_update(batch, model, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0),
                                     cfg, 1, nullcontext, engine)
    np.testing.assert_allclose(sorted(gaps), want, atol=1e-4)


def test_recompute_logprobs_fills_old_and_reference_logprobs_of_every_row_and_every_gap():
    """By default (old=True) every row gets the policy's and the reference's log-probs of its real
    tokens, and the engine gap of every non-empty row, across micro-batches of <= 8 tokens; with
    old=False (on-policy) no old log-probs but still every row's reference log-probs."""
    torch.manual_seed(0)
    policy, _ = load_policy("tiny", seed=0)
    reference = copy.deepcopy(policy).eval().requires_grad_(False)
    with torch.no_grad():
        for p in reference.parameters():
            p.add_(0.05 * torch.randn_like(p))
    batch = _batch()
    engine, want_gaps = _engine_logprobs(policy, batch)
    with torch.no_grad():
        gaps = ppo.recompute_logprobs(batch, policy, reference, 8, engine)
        np.testing.assert_allclose(sorted(gaps), want_gaps, atol=1e-4)
        assert len(batch.old_logp) == len(batch.ref_logp) == len(REAL)
        for r, (p, resp, n) in enumerate(zip(batch.prompts, batch.responses, REAL)):
            torch.testing.assert_close(batch.old_logp[r][:n].double(), _full_forward(policy, p, resp[:n])[0],
                                       atol=2e-5, rtol=1e-5)
            torch.testing.assert_close(batch.ref_logp[r][:n].double(), _full_forward(reference, p, resp[:n])[0],
                                       atol=2e-5, rtol=1e-5)
            assert len(batch.old_logp[r]) == len(batch.ref_logp[r]) == len(resp)
        on_policy = _batch()
        assert ppo.recompute_logprobs(on_policy, policy, reference, 8, engine, old=False) == []
        assert on_policy.old_logp == [] and len(on_policy.ref_logp) == len(REAL)
        for r, (p, resp, n) in enumerate(zip(on_policy.prompts, on_policy.responses, REAL)):
            assert len(on_policy.ref_logp[r]) == len(resp)
            torch.testing.assert_close(on_policy.ref_logp[r][:n].double(), _full_forward(reference, p, resp[:n])[0],
                                       atol=2e-5, rtol=1e-5)
