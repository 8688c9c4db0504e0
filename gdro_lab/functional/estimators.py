"""Estimators of prompt difficulty from rollout outcomes.

pass@k from n rollouts with c successes, unbiased (Chen et al. 2021):
    pass@k = 1 - C(n - c, k) / C(n, k),   k <= n.
Departs from the paper's code ("any of n_i correct"), whose meaning shifts when Rollout-GDRO varies n_i.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from gdro_lab._validate import ConfigError
from gdro_lab.checks import as_int, as_int_array


def pass_at_k(n: np.ndarray | int, c: np.ndarray | int, k: int) -> np.ndarray:
    """Unbiased pass@k = 1 - C(n-c, k) / C(n, k), elementwise; requires 0 <= c <= n and 1 <= k <= n.

    Every value is the exact rational rounded once to float64, so one (n, c, k) gives one value
    whatever else is in the batch; c = 0 gives exactly 0 and c >= n - k + 1 exactly 1.
    n and c must be integers (integral floats are accepted, 4.9 is an error, not 4).
    """
    n_arr = as_int_array("pass_at_k", "n", n)
    c_arr = as_int_array("pass_at_k", "c", c)
    k = as_int("pass_at_k", "k", k, low=1)
    try:
        n_arr, c_arr = np.broadcast_arrays(n_arr, c_arr)
    except ValueError:
        raise ConfigError(f"pass_at_k: c has shape {c_arr.shape}, n has {n_arr.shape}: "
                          "they must be the same shape (one entry per prompt)") from None
    if np.any(c_arr < 0) or np.any(c_arr > n_arr):
        raise ConfigError("pass_at_k: c (successes) is invalid: must be integers with 0 <= c <= n for every prompt")
    if np.any(n_arr < k):
        raise ConfigError(f"pass_at_k: k={k} is invalid: must be <= n (rollouts) for every prompt (set k <= n_min)")
    if n_arr.size == 0:
        return np.zeros(n_arr.shape)
    largest = int(n_arr.max())
    if largest <= PASSK_TABLE_LIMIT:
        return passk_table(k, largest)[n_arr, c_arr]
    pairs, inverse = np.unique(np.stack([n_arr.ravel(), c_arr.ravel()]), axis=1, return_inverse=True)
    values = np.array([_pass_at_k_exact(int(a), int(b), k) for a, b in pairs.T])
    return values[np.asarray(inverse).ravel()].reshape(n_arr.shape)


PASSK_TABLE_LIMIT = 64


@functools.lru_cache(maxsize=65536)
def _pass_at_k_exact(n: int, c: int, k: int) -> float:
    """1 - C(n-c, k) / C(n, k) as an exact fraction, rounded once (math.comb(m, k) = 0 for m < k)."""
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


@functools.lru_cache(maxsize=32)
def passk_table(k: int, largest: int) -> np.ndarray:
    """table[n, c] = pass@k for k <= n <= largest, 0 <= c <= n (the same exact values as the per-pair
    path; NaN elsewhere; read-only). Callers check k <= n themselves (``pass_at_k`` does)."""
    table = np.full((largest + 1, largest + 1), np.nan)
    for n in range(k, largest + 1):
        for c in range(n + 1):
            table[n, c] = _pass_at_k_exact(n, c, k)
    table.flags.writeable = False
    return table


def beta_passk_posterior(successes: np.ndarray, failures: np.ndarray, k: int, prior_a: float,
                         prior_b: float, credible: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Posterior of pass@k = 1 - (1 - p)^k under p ~ Beta(prior_a + s, prior_b + f).

    Returns (mean, low, high): the posterior mean 1 - B(a, b + k) / B(a, b) and the central
    ``credible`` interval, mapped through the monotone map p -> 1 - (1 - p)^k.
    """
    from scipy.special import betaincinv, betaln  # here, not at import: scipy.special costs 0.3 s (app start)

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

    New prompts (previous = -1) take bin_of(center). With low/high = estimate -/+ delta this is the
    paper's margin rule; with a credible interval the uncertainty-aware one
    (docs/core-controllers-notes.md#gdro_lab-functional-estimators).
    """
    previous = np.asarray(previous_P, np.int64)
    edges = np.asarray(edges, float)
    up = edges.searchsorted(low_P, side="right")
    down = edges.searchsorted(high_P, side="right")
    # placed prompts: down if down < previous, else up if up > previous, else previous
    placed = np.where(down < previous, down, np.maximum(up, previous))
    if previous.size and previous.min() >= 0:
        return placed
    return np.where(previous < 0, np.searchsorted(edges, center_P, side="right"), placed)


def edge_thresholds(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(up, down) for :func:`hysteresis_movers`, indexed by previous bin + 1: a prompt in bin b moves up when
    low >= up[b + 1] = a_{b+1} (inf for the top bin) and down when high < down[b + 1] = a_b (-inf for bin 0);
    a new prompt (b = -1) always "moves" (up[0] = -inf)."""
    inner = np.asarray(edges, float)
    return np.concatenate([[-np.inf], inner, [np.inf]]), np.concatenate([[np.inf, -np.inf], inner])


def hysteresis_movers(previous_P: np.ndarray, center_P: np.ndarray, low_P: np.ndarray, high_P: np.ndarray,
                      edges: np.ndarray, up: np.ndarray, down: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`hysteresis_bins` as the prompts whose bin changes: (movers, their new bins, how many of them are new
    prompts); the others keep their bin. Bands must be finite; ``up, down`` = :func:`edge_thresholds` (edges).
    Only the movers are searched (why: docs/core-controllers-notes.md#gdro_lab-controllers-difficulty).
    """
    shifted = previous_P + 1
    movers = ((low_P >= up.take(shifted)) | (high_P < down.take(shifted))).nonzero()[0]
    if not movers.size:
        return movers, movers, 0
    previous = previous_P[movers]
    new = hysteresis_bins(previous, center_P[movers], low_P[movers], high_P[movers], edges)
    return movers, new, int(np.count_nonzero(previous < 0))
