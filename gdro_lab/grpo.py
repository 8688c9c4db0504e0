"""GRPO advantages and per-prompt statistics for ragged rollout groups.

Rollouts are stored flat: ``rewards_R`` holds all rollouts, prompt i owns the next
``counts_P[i]`` entries (the layout a variable-n batch has after generation). Paper Eq. 3:
A_ij = (r_ij - mean_i) / (std_i + eps), population std by default as in the paper.
verl 0.9.1 (``compute_grpo_outcome_advantage``) uses the Bessel std (torch.std), eps added
outside the root, and mean 0 / std 1 for a group of one; ``std="bessel", singleton="verl"``
reproduces it.
"""

from __future__ import annotations

import math

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


def grpo_advantages(rewards_R: np.ndarray, counts_P: np.ndarray, *, std: str = "population",
                    eps: float = 1e-6, clip: float | None = None, normalize_std: bool = True,
                    singleton: str = "zero") -> tuple[np.ndarray, dict[str, float]]:
    """Eq. 3 for ragged groups: A_ij = (r_ij - mean_i) / (std_i + eps), optionally clipped to +-clip.

    ``std``: "population" (paper) or "bessel" (verl's torch.std, ddof 1). ``normalize_std=False``
    gives Dr.GRPO's r - mean. Groups of n >= 2 whose rewards are all equal get A = 0 exactly
    (verl gives the same whenever its group mean is exact, e.g. for any binary reward) and are
    counted in the metric ``zero_variance_frac``. ``singleton`` decides a group of one rollout:
    - "zero" (default): A = 0. One rollout has no baseline, so there is nothing group-relative to
      learn from it; this keeps every advantage a comparison within the prompt.
    - "verl": mean 0 and std 1, i.e. A = r / (1 + eps) (r without std normalisation), exactly as
      verl 0.9.1; with ``std="bessel"`` this reproduces verl's ``compute_grpo_outcome_advantage``.
    Returns (advantages_R, metrics).
    """
    if std not in ("population", "bessel"):
        raise ConfigError(f"grpo_advantages: std={std!r} is invalid: must be 'population' or 'bessel'")
    if singleton not in ("zero", "verl"):
        raise ConfigError(f"grpo_advantages: singleton={singleton!r} is invalid: must be 'zero' or 'verl'")
    if not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps >= 0):
        raise ConfigError(f"grpo_advantages: eps={eps!r} is invalid: must be a finite number >= 0")
    if clip is not None and not (isinstance(clip, (int, float)) and clip > 0):
        raise ConfigError(f"grpo_advantages: clip={clip!r} is invalid: must be None or a number > 0")
    rewards = as_float_array("grpo_advantages", "rewards_R", rewards_R, ndim=1)
    counts = _check_layout(rewards, counts_P)
    single_P = counts == 1
    mean_P = group_mean(rewards, counts)
    var_P = group_variance(rewards, counts, ddof=1 if std == "bessel" else 0)
    std_P = np.sqrt(np.where(single_P, 1.0, np.nan_to_num(var_P)))
    if singleton == "verl":
        mean_P = np.where(single_P, 0.0, mean_P)
    centered = rewards - np.repeat(mean_P, counts)
    advantages = centered / np.repeat(std_P + eps, counts) if normalize_std else centered
    constant_P = group_is_constant(rewards, counts) & ~single_P
    advantages[np.repeat(constant_P, counts)] = 0.0
    if singleton == "zero":
        advantages[np.repeat(single_P, counts)] = 0.0
    if clip is not None:
        advantages = np.clip(advantages, -clip, clip)
    zero_var_P = group_is_constant(rewards, counts)
    metrics = {"zero_variance_frac": float(zero_var_P.mean()) if counts.size else 0.0,
               "adv_abs_mean": float(np.abs(advantages).mean()) if advantages.size else 0.0}
    return advantages, metrics
