"""The policy loss as pure torch functions, one per equation (arXiv 2601.19280 §2, App. A).

Shapes: ``B`` responses of a (micro-)batch, ``T`` response tokens (right-padded), ``V`` vocabulary.
``mask_BT`` is 1 on real response tokens and 0 on padding. Every function is pure: tensors in,
tensors out, no state. Follows the paper: the ratio rho (Eq. 4), the clipped surrogate with the
asymmetric clip of App. A (0.2, 0.28) (Eq. 5), the KL penalty with beta_KL = 0.001 (Eq. 6).
Departs (as verl does, and why):
- dual clip (verl's ``clip_ratio_c`` = 3), so one token whose ratio exploded cannot dominate the update;
- verl 0.9.1's ``loss_agg_mode`` (default ``token-mean``; ``seq-mean-token-mean`` is the paper's), reproduced
  exactly, to match verl;
- the log-ratio is clamped to [-20, 20] before exp and k3 to [-10, 10] (numerical safety, as verl).
``aggregate`` takes the whole mini-batch's denominators, so micro-batch losses sum to the mini-batch
loss. The aggregation modes: docs/train-notes.md#real_runs-loss.
"""

from __future__ import annotations

import torch

AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


def token_logprobs(logits_BTV: torch.Tensor, tokens_BT: torch.Tensor) -> torch.Tensor:
    """log pi(y_t | x, y_<t) of the taken tokens: log_softmax(logits)[y_t], in float32.

    logits_BTV: the logits that predict tokens_BT (already shifted by one). Returns logp_BT.
    The raw distribution (temperature 1), the quantity in rho of Eq. 4.
    """
    logp_BTV = torch.log_softmax(logits_BTV.float(), dim=-1)
    return logp_BTV.gather(-1, tokens_BT.long().unsqueeze(-1)).squeeze(-1)


def token_entropy(logits_BTV: torch.Tensor) -> torch.Tensor:
    """H_t = -sum_v p_v log p_v per position (a metric; a bonus when entropy_coef > 0). -> ent_BT."""
    logp_BTV = torch.log_softmax(logits_BTV.float(), dim=-1)
    return -(logp_BTV.exp() * logp_BTV).sum(-1)


def clipped_surrogate(logp_BT: torch.Tensor, old_logp_BT: torch.Tensor, advantages_BT: torch.Tensor,
                      clip_low: float, clip_high: float, clip_ratio_c: float | None = 3.0,
                      ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per-token loss -J^CLIP (Eq. 4-5, App. A's asymmetric clip, verl's dual clip).

    rho = exp(clamp(logp - old_logp, -20, 20))                               (Eq. 4)
    l = max(-A rho, -A clip(rho, 1 - clip_low, 1 + clip_high))               (Eq. 5, negated)
    l = min(l, -A c) where A < 0 (dual clip, c = clip_ratio_c; None = off)
    Returns (loss_BT, indicators_BT) with float 0/1 indicators ``clip_frac`` (the clipped branch is
    taken), ``clip_frac_high`` (rho > 1 + clip_high, A > 0), ``clip_frac_low`` (rho < 1 - clip_low,
    A < 0) and ``dual_clip_frac`` (the dual cap is taken), for the caller to average over tokens.
    """
    log_ratio_BT = torch.clamp(logp_BT - old_logp_BT, -20.0, 20.0)
    ratio_BT = torch.exp(log_ratio_BT)
    unclipped_BT = -advantages_BT * ratio_BT
    clipped_BT = -advantages_BT * torch.clamp(ratio_BT, 1.0 - clip_low, 1.0 + clip_high)
    loss_BT = torch.maximum(unclipped_BT, clipped_BT)
    indicators = {"clip_frac": (clipped_BT > unclipped_BT).float(),
                  "clip_frac_high": ((ratio_BT > 1.0 + clip_high) & (advantages_BT > 0)).float(),
                  "clip_frac_low": ((ratio_BT < 1.0 - clip_low) & (advantages_BT < 0)).float()}
    if clip_ratio_c is not None:
        cap_BT = -advantages_BT * clip_ratio_c
        dual_BT = (advantages_BT < 0) & (loss_BT > cap_BT)
        loss_BT = torch.where(dual_BT, cap_BT, loss_BT)
        indicators["dual_clip_frac"] = dual_BT.float()
    return loss_BT, {k: v.detach() for k, v in indicators.items()}


def kl_penalty(logp_BT: torch.Tensor, ref_logp_BT: torch.Tensor, estimator: str = "k3") -> torch.Tensor:
    """Per-token estimate of KL(pi_theta || pi_ref) on tokens sampled from pi (Eq. 6's KL term).

    With d = log pi_ref - log pi_theta (Schulman's estimators):
    k1 = -d;  k2 = d^2 / 2;  k3 = exp(d) - d - 1, clamped to [-10, 10] ("low_var_kl", unbiased and >= 0).
    """
    delta_BT = ref_logp_BT - logp_BT
    if estimator == "k1":
        return -delta_BT
    if estimator == "k2":
        return 0.5 * delta_BT.square()
    if estimator == "k3":
        return torch.clamp(torch.exp(delta_BT) - delta_BT - 1.0, -10.0, 10.0)
    raise ValueError(f"unknown KL estimator {estimator!r}: choose k1, k2 or k3")


def aggregate(values_BT: torch.Tensor, mask_BT: torch.Tensor, mode: str = "token-mean", *,
              num_tokens: float | None = None, num_seqs: float | None = None,
              norm_length: float | None = None) -> torch.Tensor:
    """Reduce a per-token loss to a scalar exactly as verl 0.9.1's ``agg_loss`` (one process, dp_size 1).

    With m the mask, S_b = sum_t m_bt v_bt, n_b = sum_t m_bt, N_tok = sum_b n_b, N_seq = #{b : n_b > 0}:
        token-mean:              sum_b S_b / N_tok
        seq-mean-token-mean:     (1 / N_seq) sum_{b: n_b > 0} S_b / (n_b + 1e-8)    (paper Eq. 4-5, 7)
        seq-mean-token-sum:      (1 / N_seq) sum_b S_b
        seq-mean-token-sum-norm: (1 / N_seq) sum_b S_b / norm_length               (Dr. GRPO)
    ``num_tokens`` / ``num_seqs`` replace N_tok / N_seq (pass the mini-batch's totals); ``norm_length``
    None means T. Shapes: values_BT, mask_BT (B, T); returns a 0-d tensor. Against verl's names and
    sizes: docs/train-notes.md#real_runs-loss.
    """
    mask = mask_BT.to(values_BT.dtype)
    if mode == "token-mean":
        denominator = mask.sum() if num_tokens is None else num_tokens
        return torch.where(mask.bool(), values_BT, 0.0).mul(mask).sum() / denominator
    if mode not in AGG_MODES:
        raise ValueError(f"unknown loss aggregation {mode!r}: choose one of {', '.join(AGG_MODES)}")
    lengths_B = mask.sum(-1)
    summed_B = (values_BT * mask).sum(-1)
    if mode == "seq-mean-token-mean":
        summed_B = summed_B / (lengths_B + 1e-8)
    present_B = (lengths_B > 0).to(values_BT.dtype)
    count = present_B.sum() if num_seqs is None else num_seqs
    loss = torch.where(present_B.bool(), summed_B, 0.0).mul(present_B).sum() / count
    if mode == "seq-mean-token-sum-norm":
        loss = loss / (values_BT.shape[-1] if norm_length is None else norm_length)
    return loss


def policy_loss(logp_BT: torch.Tensor, old_logp_BT: torch.Tensor, advantages_B: torch.Tensor,
                mask_BT: torch.Tensor, *, clip_low: float, clip_high: float, clip_ratio_c: float | None,
                agg: str, ref_logp_BT: torch.Tensor | None = None, kl_coef: float = 0.0,
                kl_estimator: str = "k3", entropy_BT: torch.Tensor | None = None, entropy_coef: float = 0.0,
                num_tokens: float | None = None, num_seqs: float | None = None,
                norm_length: float | None = None, weights_B: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Eq. 6 per token, aggregated: l = -J^CLIP + beta_KL KL(pi || pi_ref) - c_H H.

    advantages_B: one (weighted, clipped) advantage per response, broadcast over its tokens.
    weights_B: a factor per response on its every token's l (early stopping's importance weights; None = 1).
    Returns (loss, sums): ``sums`` holds the masked token sums of each indicator of
    :func:`clipped_surrogate`, of ``kl`` and of ``entropy`` (detached), for the caller to divide
    by the mini-batch's token count.
    """
    advantages_BT = advantages_B.to(logp_BT.dtype).unsqueeze(-1).expand_as(logp_BT)
    token_loss_BT, indicators = clipped_surrogate(logp_BT, old_logp_BT, advantages_BT,
                                                  clip_low, clip_high, clip_ratio_c)
    mask = mask_BT.to(logp_BT.dtype)
    sums = {name: (value * mask).sum() for name, value in indicators.items()}
    if ref_logp_BT is not None:
        kl_BT = kl_penalty(logp_BT, ref_logp_BT, kl_estimator)
        token_loss_BT = token_loss_BT + kl_coef * kl_BT
        sums["kl"] = (kl_BT.detach() * mask).sum()
    if entropy_BT is not None:
        if entropy_coef > 0:
            token_loss_BT = token_loss_BT - entropy_coef * entropy_BT
        sums["entropy"] = (entropy_BT.detach() * mask).sum()
    if weights_B is not None:
        token_loss_BT = token_loss_BT * weights_B.to(token_loss_BT.dtype).unsqueeze(-1)
    loss = aggregate(token_loss_BT, mask_BT, agg, num_tokens=num_tokens, num_seqs=num_seqs,
                     norm_length=norm_length)
    return loss, sums
