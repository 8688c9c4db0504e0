"""The one feedback record every controller's ``update`` takes (uniform signatures).

A training loop builds one :class:`StepFeedback` per step after scoring the rollouts and passes
the same object to the classifier, the prompt weighter and the rollout allocator.
Rollouts are flat and ragged: prompt i owns the next ``counts_P[i]`` entries of ``rewards_R``.
Construction checks every field (gdro_lab.checks): NaN/inf rewards or losses, non-integer or
zero counts, bins below -1, successes other than 0/1 and an empty batch are one-line errors; a
controller checks bins < its num_bins when it reads the feedback.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from gdro_lab._validate import ConfigError
from gdro_lab.checks import as_float_array, as_int_array, check_bins
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
    variance_G: optional known per-bin variance (simulator oracle; NaN = unknown, e.g. an empty bin),
        used only by oracle allocators.
    """

    prompt_ids: Sequence[str]
    bins_P: np.ndarray
    counts_P: np.ndarray
    rewards_R: np.ndarray
    successes_R: np.ndarray
    losses_R: np.ndarray | None = None
    variance_G: np.ndarray | None = None

    def __post_init__(self) -> None:
        owner = "StepFeedback"
        num_prompts = len(self.prompt_ids)
        if num_prompts == 0:
            raise ConfigError(f"{owner}: prompt_ids is empty: a step's feedback must hold at least one prompt")
        bins = check_bins(owner, "bins_P", self.bins_P, np.iinfo(np.int64).max)
        counts = as_int_array(owner, "counts_P", self.counts_P, ndim=1, low=1)
        if bins.shape != (num_prompts,) or counts.shape != (num_prompts,):
            raise ConfigError(f"{owner}: bins_P {bins.shape} and counts_P {counts.shape} must both "
                              f"have one entry per prompt ({num_prompts}) of prompt_ids")
        total = int(counts.sum())
        for name in ("rewards_R", "successes_R", "losses_R"):
            values = getattr(self, name)
            if values is None:
                continue
            array = as_float_array(owner, name, values)
            if array.shape != (total,):
                raise ConfigError(f"{owner}: {name} has shape {array.shape}: must be ({total},) = sum(counts_P)")
        successes = np.asarray(self.successes_R)
        if successes.dtype != bool and not np.isin(successes, (0, 1)).all():
            raise ConfigError(f"{owner}: successes_R is invalid (values other than 0/1): must be booleans")
        if self.variance_G is not None:
            as_float_array(owner, "variance_G", self.variance_G, ndim=1, nonnegative=True, allow_nan=True)
        object.__setattr__(self, "bins_P", bins)
        object.__setattr__(self, "counts_P", counts)

    def check_num_bins(self, num_bins: int) -> None:
        """Raise a one-line ConfigError when a bin is >= num_bins (the controllers' B)."""
        check_bins("StepFeedback", "bins_P", self.bins_P, num_bins)

    @property
    def num_prompts(self) -> int:
        return len(self.prompt_ids)

    def variance_by_bin(self, num_bins: int) -> np.ndarray:
        """Mean within-prompt reward variance (Bessel, unbiased) per bin; NaN for empty bins.

        Prompts with one rollout have no within-prompt variance and are left out of their bin's mean.
        """
        self.check_num_bins(num_bins)
        var_P = group_variance(self.rewards_R, self.counts_P, ddof=1)
        keep = np.isfinite(var_P)
        return bin_mean(var_P[keep], np.asarray(self.bins_P)[keep], num_bins)

    def successes_P(self) -> np.ndarray:
        """Successes per prompt c_i."""
        return group_sum(np.asarray(self.successes_R, float), self.counts_P).round().astype(np.int64)
