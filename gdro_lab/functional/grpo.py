"""GRPO advantages and per-prompt statistics for ragged rollout groups.

Rollouts are stored flat: prompt i owns the next ``counts_P[i]`` entries of ``rewards_R``. Paper Eq. 3:
A_ij = (r_ij - mean_i) / (std_i + eps), population std by default as in the paper;
``std="bessel", singleton="verl"`` reproduces verl 0.9.1 (docs/core-controllers-notes.md#gdro_lab-functional-grpo).
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Generic, TypeVar

import numpy as np

from gdro_lab._validate import ConfigError
from gdro_lab.checks import as_float_array, as_int_array


def _check_layout(values_R: np.ndarray, counts_P: np.ndarray) -> np.ndarray:
    counts = as_int_array("grpo", "counts_P", counts_P, ndim=1, low=1)
    if int(counts.sum()) != np.asarray(values_R).shape[0]:
        raise ConfigError(f"grpo: counts_P sums to {int(counts.sum())} but {np.asarray(values_R).shape[0]} "
                          "rollouts were given: they must match (prompt i owns counts_P[i] rollouts)")
    return counts


def group_index(counts_P: np.ndarray) -> np.ndarray:
    """Prompt index of each flat rollout: repeat(arange(P), counts_P)."""
    counts = np.asarray(counts_P, np.int64)
    return np.repeat(np.arange(counts.size), counts)


def group_sum(values_R: np.ndarray, counts_P: np.ndarray) -> np.ndarray:
    """Per-prompt sum of a flat ragged array."""
    counts = _check_layout(values_R, counts_P)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return np.add.reduceat(np.asarray(values_R, float), starts) if counts.size else np.zeros(0)


def group_mean(values_R: np.ndarray, counts_P: np.ndarray) -> np.ndarray:
    """Per-prompt mean."""
    return group_sum(values_R, counts_P) / np.asarray(counts_P, float)


def group_variance(values_R: np.ndarray, counts_P: np.ndarray, ddof: int = 0) -> np.ndarray:
    """Per-prompt variance (ddof=0 population, ddof=1 Bessel; NaN where n <= ddof)."""
    counts = np.asarray(counts_P, float)
    mean_P = group_mean(values_R, counts_P)
    centered = np.asarray(values_R, float) - np.repeat(mean_P, np.asarray(counts_P, np.int64))
    ss_P = group_sum(centered**2, counts_P)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > ddof, ss_P / np.maximum(counts - ddof, 1), np.nan)


def group_is_constant(values_R: np.ndarray, counts_P: np.ndarray) -> np.ndarray:
    """True for prompts whose rollouts all have exactly the same value (a zero-variance group)."""
    counts = _check_layout(values_R, counts_P)
    if not counts.size:
        return np.zeros(0, bool)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    values = np.asarray(values_R, float)
    return np.maximum.reduceat(values, starts) == np.minimum.reduceat(values, starts)


T = TypeVar("T")


class computed_once(Generic[T]):
    """Like functools.cached_property, without its per-instance lock (Python 3.11): the first read
    stores the value in the instance ``__dict__``, later reads are plain attribute hits. Works on
    frozen dataclasses (it never calls ``__setattr__``)."""

    def __init__(self, fn: Callable[[Any], T]):
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> T:
        if obj is None:
            return self  # type: ignore[return-value]
        value = obj.__dict__[self.name] = self.fn(obj)
        return value


class RewardGroups:
    """Per-prompt statistics of flat ragged rewards, each computed once on first use (shared arrays: do not modify).

    Needs ``rewards_R`` (finite float64), ``counts_P`` (int64 >= 1, summing to R) and ``min_count``;
    :class:`gdro_lab.controllers.feedback.StepFeedback` inherits it, :func:`grpo_advantages` wraps its inputs in it.
    Every value is computed as the module's functions compute it (same operations, same order).
    """

    rewards_R: np.ndarray
    counts_P: np.ndarray
    min_count: int

    @computed_once
    def starts_P(self) -> np.ndarray:
        """Offset of each prompt's first rollout in the flat arrays."""
        return self.counts_P.cumsum() - self.counts_P

    @computed_once
    def group_R(self) -> np.ndarray:
        """Prompt of each flat rollout, repeat(arange(P), counts_P)."""
        return np.arange(self.counts_P.size).repeat(self.counts_P)

    @computed_once
    def reward_mean_P(self) -> np.ndarray:
        """Mean reward per prompt (= group_mean)."""
        return (np.add.reduceat(self.rewards_R, self.starts_P) / self.counts_P)

    @computed_once
    def _centered_R(self) -> np.ndarray:
        """r_ij - mean_i (shared: copy before modifying)."""
        return self.rewards_R - self.reward_mean_P[self.group_R]

    @computed_once
    def _reward_ss_P(self) -> np.ndarray:
        centered = self._centered_R
        return np.add.reduceat(centered * centered, self.starts_P)

    @computed_once
    def _variances(self) -> dict[int, np.ndarray]:
        return {}

    def reward_var_P(self, ddof: int = 0) -> np.ndarray:
        """Reward variance per prompt (= group_variance: ddof 0 population, 1 Bessel; NaN where n <= ddof)."""
        out = self._variances.get(ddof)
        if out is None:
            counts = self.counts_P
            if self.min_count > ddof:  # counts - ddof >= 1 everywhere: max(., 1) is the identity
                out = self._reward_ss_P / (counts - ddof) if ddof else self._reward_ss_P / counts
            else:
                out = np.where(counts > ddof, self._reward_ss_P / np.maximum(counts - ddof, 1), np.nan)
            out = self._variances[ddof] = (out)
        return out

    @computed_once
    def constant_P(self) -> np.ndarray:
        """True for prompts whose rewards are all exactly equal (= group_is_constant)."""
        starts = self.starts_P
        return (np.maximum.reduceat(self.rewards_R, starts) == np.minimum.reduceat(self.rewards_R, starts))


class _Groups(RewardGroups):
    def __init__(self, rewards_R: np.ndarray, counts_P: np.ndarray):
        self.rewards_R = rewards_R
        self.counts_P = counts_P
        self.min_count = int(counts_P.min())



@functools.lru_cache(maxsize=64)
def check_advantage_options(std: str, eps: float, clip: float | None, singleton: str) -> None:
    """One-line ConfigError for a bad option of :func:`grpo_advantages`."""
    if std not in ("population", "bessel"):
        raise ConfigError(f"grpo_advantages: std={std!r} is invalid: must be 'population' or 'bessel'")
    if singleton not in ("zero", "verl"):
        raise ConfigError(f"grpo_advantages: singleton={singleton!r} is invalid: must be 'zero' or 'verl'")
    if not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps >= 0):
        raise ConfigError(f"grpo_advantages: eps={eps!r} is invalid: must be a finite number >= 0")
    if clip is not None and not (isinstance(clip, (int, float)) and clip > 0):
        raise ConfigError(f"grpo_advantages: clip={clip!r} is invalid: must be None or a number > 0")


def grpo_advantages(rewards_R: np.ndarray, counts_P: np.ndarray, *, std: str = "population",
                    eps: float = 1e-6, clip: float | None = None, normalize_std: bool = True,
                    singleton: str = "zero") -> tuple[np.ndarray, dict[str, float]]:
    """Eq. 3 for ragged groups: A_ij = (r_ij - mean_i) / (std_i + eps), optionally clipped to +-clip.

    ``std``: "population" (paper) or "bessel" (verl's ddof 1). ``normalize_std=False`` gives Dr.GRPO's
    r - mean. Equal-reward groups get A = 0 (``zero_variance_frac``). ``singleton``: a group of one gets
    "zero" (default: no baseline) or "verl" r / (1 + eps). Returns (advantages_R, metrics). Detail:
    docs/core-controllers-notes.md#gdro_lab-functional-grpo.
    """
    check_advantage_options(std, eps, clip, singleton)
    rewards = np.asarray(rewards_R, dtype=float) if isinstance(rewards_R, np.ndarray) else None
    if rewards is None or rewards.ndim != 1 or not np.isfinite(rewards).all():
        rewards = as_float_array("grpo_advantages", "rewards_R", rewards_R, ndim=1)
    counts = _check_layout(rewards, counts_P)
    if not counts.size:
        return np.zeros(0), {"zero_variance_frac": 0.0, "adv_abs_mean": 0.0}
    return advantages_from_stats(_Groups(rewards, counts), std, eps, clip, normalize_std, singleton)


def advantages_from_stats(groups: RewardGroups, std: str, eps: float, clip: float | None, normalize_std: bool,
                          singleton: str) -> tuple[np.ndarray, dict[str, float]]:
    """:func:`grpo_advantages` on validated inputs and their cached per-prompt statistics."""
    counts = groups.counts_P
    group = groups.group_R
    var_P = groups.reward_var_P(1 if std == "bessel" else 0)
    mean_P = groups.reward_mean_P
    constant_P = groups.constant_P
    if groups.min_count > 1:  # no group of one (the usual case): no special cases
        std_P = np.sqrt(var_P)
        zero_P = constant_P
    else:
        single_P = counts == 1
        std_P = np.sqrt(np.where(single_P, 1.0, np.nan_to_num(var_P)))
        if singleton == "verl":
            mean_P = np.where(single_P, 0.0, mean_P)
            zero_P = constant_P & ~single_P
        else:
            zero_P = constant_P  # a group of one is constant
    if mean_P is groups.reward_mean_P:
        centered = groups._centered_R  # the same r - mean the variance used (shared: not modified below)
    else:
        centered = groups.rewards_R - mean_P[group]
    advantages = centered / (std_P + eps)[group] if normalize_std else centered.copy()
    advantages[zero_P[group]] = 0.0
    if clip is not None:
        np.maximum(advantages, -clip, out=advantages)
        np.minimum(advantages, clip, out=advantages)
    metrics = {"zero_variance_frac": np.count_nonzero(constant_P) / counts.size,
               "adv_abs_mean": float(np.add.reduce(np.abs(advantages)) / advantages.size) if advantages.size else 0.0}
    return advantages, metrics
