"""Empirical-Bayes shrinkage of per-prompt success rates toward their bin (beta-binomial).

Prompt i of bin b has p_i ~ Beta(alpha_b, beta_b) and s_i ~ Binomial(n_i, p_i); the prior is the method
of moments on the bin's raw rates, the posterior Beta(alpha_b + s_i, beta_b + n_i - s_i), and the
reward variance (rewards +-1) its posterior mean of 4 p (1 - p). A prompt with no history gets its
bin's prior. Shapes: ``P`` prompts, ``G`` bins. The estimator: docs/core-allocation-notes.md#gdro_lab-allocation-shrinkage.
"""

from __future__ import annotations

import numpy as np

from gdro_lab.allocation.vip import beta_expected_variance
from gdro_lab.checks import check_bins


def bin_rate_moments(successes_P: np.ndarray, trials_P: np.ndarray, bins_P: np.ndarray, num_bins: int,
                     pooled: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(m_G, tau2_G, prompts_G): pooled mean and between-prompt variance of p per bin (NaN where a
    bin has no prompt with trials; tau2 NaN with fewer than two). Prompts with bin -1 are ignored,
    except that ``pooled`` appends one more entry computed over every prompt (bin -1 included).

    From per-bin sums (one bincount each): Var(r) = (sum r^2 - (sum r)^2 / c) / (c - 1).
    """
    bins = check_bins("bin_rate_moments", "bins_P", bins_P, num_bins)
    s = np.asarray(successes_P, float)
    n = np.asarray(trials_P, float)
    keep = n > 0
    slot = np.where(bins >= 0, bins, num_bins)[keep]
    s, n = s[keep], n[keep]
    rate = s / n
    size = num_bins + 1
    sums = np.stack([np.bincount(slot, weights=w, minlength=size) for w in (np.ones(slot.size), s, n, rate,
                                                                             rate * rate, 1.0 / n)])
    if pooled:
        sums = np.concatenate([sums[:, :num_bins], sums.sum(axis=1, keepdims=True)], axis=1)
    else:
        sums = sums[:, :num_bins]
    count, sum_s, sum_n, sum_r, sum_r2, sum_inv = sums
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(sum_n > 0, sum_s / np.maximum(sum_n, 1e-300), np.nan)
        rate_var = (sum_r2 - sum_r * sum_r / np.maximum(count, 1)) / np.maximum(count - 1, 1)
        inv_n = sum_inv / count
        tau2 = np.maximum(0.0, (rate_var - mean * (1 - mean) * inv_n) / np.maximum(1.0 - inv_n, 1e-12))
    return mean, np.where(count >= 2, tau2, np.nan), count


def beta_prior(mean_G: np.ndarray, tau2_G: np.ndarray, kappa_min: float, kappa_max: float
               ) -> tuple[np.ndarray, np.ndarray]:
    """(alpha_G, beta_G) with mean m and strength kappa = m (1 - m) / tau^2 - 1 in [kappa_min, kappa_max].

    m is kept in [1e-3, 1 - 1e-3] so every prior is proper; tau^2 = 0 or NaN gives kappa_max.
    """
    m = np.clip(np.asarray(mean_G, float), 1e-3, 1.0 - 1e-3)
    tau2 = np.asarray(tau2_G, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = np.where(np.isfinite(tau2) & (tau2 > 0), m * (1.0 - m) / tau2 - 1.0, kappa_max)
    kappa = np.clip(kappa, kappa_min, kappa_max)
    return m * kappa, (1.0 - m) * kappa


def shrunk_variance(alpha_P: np.ndarray, beta_P: np.ndarray, successes_P: np.ndarray,
                    trials_P: np.ndarray) -> np.ndarray:
    """Posterior mean of 4 p (1 - p) under Beta(alpha + s, beta + n - s) (rewards +-1), shape (P,)."""
    s = np.asarray(successes_P, float)
    n = np.asarray(trials_P, float)
    return 4.0 * beta_expected_variance(np.asarray(alpha_P, float) + s, np.asarray(beta_P, float) + n - s)
