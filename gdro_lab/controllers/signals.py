"""Difficulty signals: the per-prompt value Prompt-GDRO's adversary maximises (registered by name).

Every signal has the same signature ``signal(feedback) -> signal_P`` (higher = more weight); it may
return a cached array of the feedback, so a caller must not modify it in place.
- ``surrogate`` (paper Eq. 6-7) from ``feedback.losses_R``: averages to ~0 on-policy, since GRPO advantages sum to
  zero per group;
- ``failure_rate`` (default; departs from the paper's surrogate, which carries no difficulty signal):
  1 - mean success, the group risk L_b of Eq. 8 for the 0/1 loss;
- ``reward_std``: within-prompt reward std (population). Why: docs/core-controllers-notes.md#gdro_lab-controllers-signals.
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
