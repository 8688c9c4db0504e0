"""Difficulty signals: the per-prompt value Prompt-GDRO's adversary maximises (registered by name).

Every signal has the same signature ``signal(feedback) -> signal_P`` (higher = the adversary
wants more weight there); they read the feedback's cached per-prompt statistics, and may return
one of them (``failure_rate``: the weighter and the step record share it), so a caller must not
modify the returned array in place.

- ``surrogate`` (paper Eq. 6-7): l(x_i) = (1/n_i) sum_j l_ij with l_ij = -J^CLIP_ij + beta KL,
  from per-rollout losses a trainer supplies in ``feedback.losses_R``. **Why it averages to ~0:**
  on-policy (rho = 1, the first PPO mini-batch) J^CLIP_ij = A_ij, and group-normalised GRPO
  advantages sum to zero within every group, so l(x_i) = -(1/n) sum_j A_ij + beta KL = beta KL.
  What is left is the KL term plus the drift of rho across later mini-batches and clipping:
  small, and unrelated to how hard the prompt is. Without ``losses_R`` this signal returns
  that on-policy value (-mean_j A_ij = 0), which makes the degeneracy explicit.
- ``failure_rate`` (default): 1 - mean success. It is the group risk L_b of Eq. 8 for the
  0/1 loss, the quantity whose worst group GDRO is meant to lift, and it is never degenerate.
- ``reward_std``: within-prompt reward std (population). Peaks at success 1/2 and is 0 on
  all-fail / all-pass prompts, whose GRPO advantages are 0 anyway: it steers weight to the
  "learnable frontier" (Foster et al. 2025) that the paper's adversary ends up favouring.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from gdro_lab.controllers.feedback import StepFeedback

SignalFn = Callable[[StepFeedback], np.ndarray]
SIGNALS: dict[str, SignalFn] = {}


def register_signal(name: str) -> Callable[[SignalFn], SignalFn]:
    """Decorator: make ``fn`` available as signal ``name``."""
    def wrap(fn: SignalFn) -> SignalFn:
        SIGNALS[name] = fn
        return fn
    return wrap


@register_signal("surrogate")
def surrogate_signal(feedback: StepFeedback) -> np.ndarray:
    """Eq. 7: mean per-rollout loss; without trainer losses, the on-policy value -mean(A) (= 0)."""
    if feedback.losses_R is not None:
        return np.add.reduceat(feedback.losses_R, feedback.starts_P) / feedback.counts_P  # = group_mean
    advantages, _ = feedback.advantages()
    return -(np.add.reduceat(advantages, feedback.starts_P) / feedback.counts_P)


@register_signal("failure_rate")
def failure_rate_signal(feedback: StepFeedback) -> np.ndarray:
    """1 - mean success of the prompt's rollouts (the feedback's cached array: do not modify it in place)."""
    return feedback.failure_rate_P


@register_signal("reward_std")
def reward_std_signal(feedback: StepFeedback) -> np.ndarray:
    """Population std of the prompt's rewards."""
    return np.sqrt(feedback.reward_var_P(0))
