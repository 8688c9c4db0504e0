"""Estimators of prompt difficulty from rollout outcomes.

pass@k from n rollouts with c successes, unbiased (Chen et al. 2021):
    pass@k = 1 - C(n - c, k) / C(n, k),   k <= n.
This replaces the paper code's "any of n_i correct", whose meaning shifts when Rollout-GDRO
varies n_i; with a fixed k <= n_min every prompt's estimate means the same thing.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import betaincinv, betaln, gammaln

from gdro_lab._validate import ConfigError


def pass_at_k(n: np.ndarray | int, c: np.ndarray | int, k: int) -> np.ndarray:
    """Unbiased pass@k = 1 - C(n-c, k) / C(n, k), elementwise; requires 0 <= c <= n and k <= n."""
    n_arr = np.asarray(n, np.int64)
    c_arr = np.asarray(c, np.int64)
    if np.any(c_arr < 0) or np.any(c_arr > n_arr):
        raise ConfigError("pass@k needs 0 <= successes <= rollouts for every prompt")
    if k < 1 or np.any(n_arr < k):
        raise ConfigError(f"pass@k with k={k} needs k >= 1 and at least k rollouts per prompt "
                          "(set k <= n_min)")
    largest = int(n_arr.max()) if n_arr.size else 0
    if largest <= _TABLE_LIMIT:
        return _pass_at_k_table(k, largest)[n_arr, c_arr]
    fail = n_arr - c_arr
    with np.errstate(invalid="ignore"):
        log_ratio = (gammaln(fail + 1) - gammaln(np.maximum(fail - k, 0) + 1)
                     - gammaln(n_arr + 1) + gammaln(n_arr - k + 1))
    return np.where(fail >= k, 1.0 - np.exp(log_ratio), 1.0)


_TABLE_LIMIT = 64


@functools.lru_cache(maxsize=32)
def _pass_at_k_table(k: int, largest: int) -> np.ndarray:
    """table[n, c] = 1 - C(n-c, k) / C(n, k) for n <= largest, exact via integer binomials."""
    table = np.full((largest + 1, largest + 1), np.nan)
    for n in range(k, largest + 1):
        for c in range(n + 1):
            table[n, c] = 1.0 - math.comb(n - c, k) / math.comb(n, k)
    return table


def beta_passk_posterior(successes: np.ndarray, failures: np.ndarray, k: int, prior_a: float,
                         prior_b: float, credible: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Posterior of pass@k = 1 - (1 - p)^k under p ~ Beta(prior_a + s, prior_b + f).

    Returns (mean, low, high): the posterior mean 1 - B(a, b + k) / B(a, b) and the central
    ``credible`` interval, mapped through the monotone map p -> 1 - (1 - p)^k.
    """
    a = prior_a + np.asarray(successes, float)
    b = prior_b + np.asarray(failures, float)
    mean = 1.0 - np.exp(betaln(a, b + k) - betaln(a, b))
    tail = 0.5 * (1.0 - credible)
    p_low = betaincinv(a, b, tail)
    p_high = betaincinv(a, b, 1.0 - tail)
    return mean, 1.0 - (1.0 - p_low) ** k, 1.0 - (1.0 - p_high) ** k


def bin_of(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Eq. 11: bin b holds values in [a_b, a_{b+1}) for inner edges a_1 < ... < a_{B-1}; bin 0 = hardest."""
    return np.searchsorted(np.asarray(edges, float), np.asarray(values, float), side="right")


def hysteresis_bins(previous_P: np.ndarray, center_P: np.ndarray, low_P: np.ndarray,
                    high_P: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bins with hysteresis: a prompt moves only when its whole band [low, high] clears an edge.

    New prompts (previous = -1) take bin_of(center). A placed prompt moves up to bin_of(low)
    when that is above its bin and down to bin_of(high) when that is below; otherwise it stays.
    With low/high = estimate -/+ delta this is the paper's margin rule (move up only if
    acc >= edge + delta, down only if acc < edge - delta); with a credible interval it is the
    uncertainty-aware rule.
    """
    previous = np.asarray(previous_P, np.int64)
    up = bin_of(low_P, edges)
    down = bin_of(high_P, edges)
    new = np.where(previous < 0, bin_of(center_P, edges), previous)
    placed = previous >= 0
    new = np.where(placed & (up > previous), up, new)
    new = np.where(placed & (down < previous), down, new)
    return new
