"""The one feedback record every controller's ``update`` takes (uniform signatures).

A training loop builds one :class:`StepFeedback` per step after scoring the rollouts and passes
the same object to the classifier, the prompt weighter and the rollout allocator.
Rollouts are flat and ragged: prompt i owns the next ``counts_P[i]`` entries of ``rewards_R``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from gdro_lab._validate import ConfigError
from gdro_lab.diagnostics import bin_mean
from gdro_lab.grpo import group_sum, group_variance


@dataclass(frozen=True)
class StepFeedback:
    """Outcome of one step's rollouts.

    prompt_ids: stable prompt ids (strings), length P.
    bins_P: bin of each prompt used for this step's plan and weights (-1 = unassigned).
    counts_P: rollouts generated per prompt (>= 1).
    rewards_R: reward of each rollout, flat, sum(counts_P) entries.
    successes_R: whether each rollout solved the prompt (bool), same layout.
    losses_R: optional per-rollout loss l_ij (Eq. 6) from a trainer, for the `surrogate` signal.
    variance_G: optional known per-bin variance (simulator oracle), used only by oracle allocators.
    """

    prompt_ids: Sequence[str]
    bins_P: np.ndarray
    counts_P: np.ndarray
    rewards_R: np.ndarray
    successes_R: np.ndarray
    losses_R: np.ndarray | None = None
    variance_G: np.ndarray | None = None

    def __post_init__(self) -> None:
        num_prompts = len(self.prompt_ids)
        bins = np.asarray(self.bins_P)
        counts = np.asarray(self.counts_P)
        if bins.shape != (num_prompts,) or counts.shape != (num_prompts,):
            raise ConfigError(f"feedback: bins_P {bins.shape} and counts_P {counts.shape} must both "
                              f"have one entry per prompt ({num_prompts})")
        total = int(counts.sum()) if counts.size else 0
        for name in ("rewards_R", "successes_R", "losses_R"):
            values = getattr(self, name)
            if values is not None and np.asarray(values).shape != (total,):
                raise ConfigError(f"feedback: {name} has shape {np.asarray(values).shape}, "
                                  f"expected ({total},) = sum(counts_P)")
        if counts.size and counts.min() < 1:
            raise ConfigError("feedback: every prompt needs at least one rollout")

    @property
    def num_prompts(self) -> int:
        return len(self.prompt_ids)

    def variance_by_bin(self, num_bins: int) -> np.ndarray:
        """Mean within-prompt reward variance (Bessel, unbiased) per bin; NaN for empty bins."""
        var_P = group_variance(self.rewards_R, self.counts_P, ddof=1)
        return bin_mean(var_P, self.bins_P, num_bins)

    def successes_P(self) -> np.ndarray:
        """Successes per prompt c_i."""
        return group_sum(np.asarray(self.successes_R, float), self.counts_P).round().astype(np.int64)
