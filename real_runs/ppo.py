"""The policy update of `gdro train`: steps 4-6 of :mod:`real_runs.train`'s step, between the
controllers and the optimizer.

4. :func:`weighted_advantages` (Eq. 3 x Eq. 16) and
   :func:`trained_rows`;
5. :func:`recompute_logprobs`: old and reference log-probs by a teacher-forced pass (the engine's are
   not used; :meth:`RolloutBatch.engine_gaps` measures the difference; :func:`on_policy_update`);
6. :func:`ppo_update`: PPO epochs over mini-batches, the loss of :mod:`real_runs.loss` (Eq. 4-6).
Batching helpers: :mod:`real_runs.batching`. Detail: docs/train-notes.md#real_runs-ppo.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from gdro_lab import StepFeedback
from real_runs import loss as L
from real_runs.batching import RolloutBatch, micro_batches
from real_runs.config import TrainConfig


def weighted_advantages(feedback: StepFeedback, multipliers_P: np.ndarray, cfg: TrainConfig
                        ) -> tuple[np.ndarray, dict[str, float]]:
    """Eq. 16 on Eq. 3: A_ij = m_i x clip((r_ij - mean_i) / (std_i + 1e-6), +-adv_clip) x adv_scale,
    response j of prompt i (rows grouped by prompt, ``feedback.counts_P`` each). -> (A_R, GRPO metrics)."""
    lc = cfg.loss
    advantages_R, metrics = feedback.advantages(std=lc.adv_std, clip=lc.adv_clip)
    return advantages_R * np.repeat(multipliers_P, feedback.counts_P) * lc.adv_scale, metrics


def trained_rows(batch: RolloutBatch, engine_logprobs: Sequence[np.ndarray], keep_R: np.ndarray
                 ) -> tuple[RolloutBatch, Sequence[np.ndarray]]:
    """The rows of the groups the prompt selector keeps (the batch itself when it keeps every one)."""
    if keep_R.all():
        return batch, engine_logprobs
    rows = np.flatnonzero(keep_R)
    return (RolloutBatch([batch.prompts[r] for r in rows], [batch.responses[r] for r in rows], batch.real_lengths[rows],
                         batch.lengths[rows], batch.advantages[rows], batch.pad_id,
                         weights=None if batch.weights is None else batch.weights[rows]),
            [engine_logprobs[r] for r in rows.tolist()])


def on_policy_update(cfg: TrainConfig, policy: torch.nn.Module) -> bool:
    """True when the update takes one optimizer step on the whole batch (one PPO epoch, one
    mini-batch) of a model without dropout: its log-probs then equal the old ones exactly, so the
    update uses their detached values as ``old_logp`` (ratio exactly 1, as TRL's GRPOTrainer does
    when it generates every step) and the separate old-log-prob pass is skipped."""
    tc = cfg.train
    dropout = any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in policy.modules())
    config = getattr(policy, "config", None)
    dropout = dropout or any(float(getattr(config, name, 0.0) or 0.0) > 0
                             for name in ("attention_dropout", "hidden_dropout", "resid_pdrop", "dropout"))
    return tc.ppo_epochs == 1 and tc.mini_batches == 1 and not dropout


def recompute_logprobs(batch: RolloutBatch, policy: torch.nn.Module, reference: torch.nn.Module | None,
                       token_budget: int, engine_logprobs: Sequence[np.ndarray], old: bool = True) -> list[float]:
    """Fill ``batch.old_logp`` (policy before the update; only when ``old``) and ``batch.ref_logp``
    (frozen reference; only with one).

    Returns the largest |trainer - engine| log-prob gap per sample (a consistency metric only;
    empty when ``old`` is False: :func:`ppo_update` measures it then).
    """
    policy.eval()
    count = len(batch.responses)
    batch.old_logp = [torch.empty(0)] * count if old else []
    batch.ref_logp = [torch.empty(0)] * count
    gaps: list[float] = []
    if not old and reference is None:
        return gaps
    for rows in micro_batches(batch.lengths, token_budget):
        if reference is not None:
            ref = batch.forward(reference, rows)[0]
            for j, r in enumerate(rows):
                batch.ref_logp[r] = ref[j, :len(batch.responses[r])].float()
        if not old:
            continue
        logp = batch.forward(policy, rows)[0]
        for j, r in enumerate(rows):
            batch.old_logp[r] = logp[j, :len(batch.responses[r])].float()
        gaps += batch.engine_gaps(rows, logp, engine_logprobs)
    return gaps


def ppo_update(batch: RolloutBatch, policy: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
               cfg: TrainConfig, step: int, autocast: Any, engine_logprobs: Sequence[np.ndarray] | None = None,
               ) -> tuple[dict[str, float], list[float], list[float], list[float]]:
    """PPO epochs over mini-batches (seeded shuffle), micro-batches by token budget, one optimizer
    step per mini-batch. Returns (metric token sums, loss per mini-batch, grad norm per mini-batch,
    engine log-prob gaps).

    Without ``batch.old_logp`` (an on-policy update, :func:`on_policy_update`) the old log-probs
    are the update's own, detached, and the engine gaps are measured on them (``engine_logprobs``)."""
    tc, lc = cfg.train, cfg.loss
    device = next(policy.parameters()).device
    sums: dict[str, float] = {}
    losses, grad_norms, gaps = [], [], []
    on_policy = not batch.old_logp
    if on_policy and (tc.ppo_epochs != 1 or tc.mini_batches != 1):
        raise ValueError("ppo_update: old log-probs are needed for more than one optimizer step per batch")
    policy.train()
    for epoch in range(tc.ppo_epochs):
        shuffled = np.random.default_rng([tc.seed, step, epoch]).permutation(len(batch.responses))
        for mini in np.array_split(shuffled, tc.mini_batches):
            optimizer.zero_grad(set_to_none=True)
            total = 0.0
            for rows in micro_batches(batch.lengths[mini], tc.micro_batch_tokens):
                rows = mini[rows]
                with autocast():
                    logp, mask, entropy = batch.forward(policy, rows, with_entropy=True,
                                                        entropy_grad=lc.entropy_coef > 0)
                if on_policy:
                    old_logp = logp.detach().float()
                    if engine_logprobs is not None:
                        gaps += batch.engine_gaps(rows, old_logp, engine_logprobs)
                else:
                    old_logp = batch.padded(batch.old_logp, rows, device)
                loss, part = L.policy_loss(
                    logp, old_logp, torch.as_tensor(batch.advantages[rows], device=device),
                    mask, clip_low=lc.clip_low, clip_high=lc.clip_high, clip_ratio_c=lc.clip_ratio_c, agg=lc.agg,
                    ref_logp_BT=batch.padded(batch.ref_logp, rows, device) if lc.kl_coef > 0 else None,
                    kl_coef=lc.kl_coef, kl_estimator=lc.kl_estimator, entropy_BT=entropy, entropy_coef=lc.entropy_coef,
                    num_tokens=float(max(batch.real_lengths[mini].sum(), 1)),
                    num_seqs=float(max(int(np.count_nonzero(batch.real_lengths[mini])), 1)),  # verl: non-empty only
                    norm_length=float(cfg.rollout.max_new_tokens),
                    weights_B=None if batch.weights is None else torch.as_tensor(batch.weights[rows], device=device))
                loss.backward()
                total += float(loss.detach())
                for key, value in part.items():
                    sums[key] = sums.get(key, 0.0) + float(value)
            grad_norms.append(float(torch.nn.utils.clip_grad_norm_(policy.parameters(),
                                                                    cfg.optim.grad_clip or float("inf"))))
            losses.append(total)
            optimizer.step()
            scheduler.step()
    policy.eval()
    return sums, losses, grad_norms, gaps
