"""GRPO advantages and per-prompt statistics for ragged rollout groups.

Rollouts are stored flat: ``rewards_R`` holds all rollouts, prompt i owns the next
``counts_P[i]`` entries (the layout a variable-n batch has after generation). Paper Eq. 3:
A_ij = (r_ij - mean_i) / (std_i + eps), population std by default as in the paper
(verl uses the Bessel std; ``std="bessel"`` gives that).
"""

from __future__ import annotations

import numpy as np

from gdro_lab._validate import ConfigError


def _check_layout(values_R: np.ndarray, counts_P: np.ndarray) -> np.ndarray:
    counts = np.asarray(counts_P, np.int64)
    if counts.ndim != 1 or np.any(counts < 1):
        raise ConfigError("counts_P must be a 1-D array of positive rollout counts")
    if int(counts.sum()) != np.asarray(values_R).shape[0]:
        raise ConfigError(f"{np.asarray(values_R).shape[0]} rollouts given but counts_P sums to {int(counts.sum())}")
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
                    eps: float = 1e-6, clip: float | None = None,
                    normalize_std: bool = True) -> tuple[np.ndarray, dict[str, float]]:
    """Eq. 3 for ragged groups: A_ij = (r_ij - mean_i) / (std_i + eps), optionally clipped to +-clip.

    ``std``: "population" (paper) or "bessel" (verl's torch.std). ``normalize_std=False`` gives
    Dr.GRPO's r - mean. Groups whose rewards are all equal get A = 0 and are counted in the
    returned metric ``zero_variance_frac``. Returns (advantages_R, metrics).
    """
    if std not in ("population", "bessel"):
        raise ConfigError(f"std={std!r} is invalid: must be 'population' or 'bessel'")
    counts = _check_layout(rewards_R, counts_P)
    if std == "bessel" and np.any(counts < 2):
        raise ConfigError("the Bessel std needs at least 2 rollouts per prompt (n_min >= 2)")
    rewards = np.asarray(rewards_R, float)
    mean_P = group_mean(rewards, counts)
    var_P = group_variance(rewards, counts, ddof=1 if std == "bessel" else 0)
    std_P = np.sqrt(np.nan_to_num(var_P))
    centered = rewards - np.repeat(mean_P, counts)
    with np.errstate(divide="ignore", invalid="ignore"):
        advantages = centered / np.repeat(std_P + eps, counts) if normalize_std else centered
    zero_var_P = group_is_constant(rewards, counts)
    advantages[np.repeat(zero_var_P, counts)] = 0.0
    if clip is not None:
        advantages = np.clip(advantages, -clip, clip)
    metrics = {"zero_variance_frac": float(zero_var_P.mean()) if counts.size else 0.0,
               "adv_abs_mean": float(np.abs(advantages).mean()) if advantages.size else 0.0}
    return advantages, metrics
