"""Diagnostics of the paper as pure functions (§5 figures; Eq. 32-33).

Shapes: ``G`` bins, ``P`` prompts, ``R`` rollouts (flat, ragged by ``counts_P``), ``T`` steps.
Empty bins give NaN for means; shares and weights are plain arrays over all G bins.
"""

from __future__ import annotations

import numpy as np

from gdro_lab.allocation import sqrt_allocation


def bin_counts(bins_P: np.ndarray, num_bins: int) -> np.ndarray:
    """Prompts per bin; unassigned prompts (bin -1) are not counted."""
    bins = np.asarray(bins_P, np.int64)
    return np.bincount(bins[bins >= 0], minlength=num_bins)[:num_bins].astype(float)


def bin_share(bins_P: np.ndarray, num_bins: int) -> np.ndarray:
    """Realized share q_hat_t(b) = |B_b,t| / |B_t| over assigned prompts (zeros if none)."""
    counts = bin_counts(bins_P, num_bins)
    total = counts.sum()
    return counts / total if total > 0 else counts


def bin_mean(values_P: np.ndarray, bins_P: np.ndarray, num_bins: int) -> np.ndarray:
    """Mean of a per-prompt value within each bin (Eq. 13); NaN where a bin is empty."""
    bins = np.asarray(bins_P, np.int64)
    keep = bins >= 0
    values = np.asarray(values_P, float)[keep]
    sums = np.bincount(bins[keep], weights=values, minlength=num_bins)[:num_bins]
    counts = np.bincount(bins[keep], minlength=num_bins)[:num_bins]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def normalized(weights_G: np.ndarray) -> np.ndarray:
    """Weights scaled to sum to one (uniform if they sum to zero)."""
    w = np.asarray(weights_G, float)
    total = w.sum()
    return w / total if total > 0 else np.full_like(w, 1.0 / w.size)


def lead_lag_gap(weights_G: np.ndarray, share_G: np.ndarray) -> tuple[float, float, float]:
    """Eq. 32: (gap, mu_weight, mu_data) with mu_weight = sum_b b w_hat(b), mu_data = sum_b b q(b).

    ``weights_G`` are the Prompt-GDRO bin weights (normalised here, not multiplied by the
    share); ``share_G`` the empirical prompt share. A positive gap means the adversary sits
    on higher-index (more solvable) bins than the data.
    """
    index = np.arange(len(weights_G), dtype=float)
    mu_weight = float(index @ normalized(weights_G))
    mu_data = float(index @ normalized(share_G))
    return mu_weight - mu_data, mu_weight, mu_data


def se_proxy(share_G: np.ndarray, sigma_G: np.ndarray, n_G: np.ndarray) -> float:
    """Eq. 33: WSE = sum_b q_b sigma_b / sqrt(n_b), over bins with q_b > 0 and finite sigma."""
    q, s, n = (np.asarray(x, float) for x in (share_G, sigma_G, n_G))
    live = (q > 0) & np.isfinite(s) & (n > 0)
    return float(np.sum(q[live] * s[live] / np.sqrt(n[live])))


def variance_proxy(share_G: np.ndarray, variance_G: np.ndarray, n_G: np.ndarray) -> float:
    """Eq. 28: VarProxy = sum_b q_b v_b / n_b (the quantity the square-root law minimises)."""
    q, v, n = (np.asarray(x, float) for x in (share_G, variance_G, n_G))
    live = (q > 0) & np.isfinite(v) & (n > 0)
    return float(np.sum(q[live] * v[live] / n[live]))


def se_report(share_G: np.ndarray, sigma_G: np.ndarray, n_G: np.ndarray, n_bar: float,
              n_min: float, n_max: float) -> dict[str, float]:
    """WSE for the allocation used, for uniform n_bar, and for the square-root optimum.

    The optimum is the box-constrained square-root law of Thm 4.2 with v_b = sigma_b^2: the
    limit Rollout-GDRO converges to. Note it minimises the variance proxy (Eq. 28), not WSE
    itself, so an allocation can score a slightly lower WSE than it. ``reduction_pct`` is
    100 (1 - WSE_actual / WSE_uniform) as reported in the paper (22.6-37.1%).
    """
    q = np.asarray(share_G, float)
    sigma = np.where(np.isfinite(sigma_G), np.asarray(sigma_G, float), 0.0)
    uniform = se_proxy(q, sigma, np.full(q.size, float(n_bar)))
    actual = se_proxy(q, sigma, n_G)
    if q.sum() > 0:
        optimum = se_proxy(q, sigma, sqrt_allocation(sigma**2, q, n_bar, n_min, n_max))
    else:
        optimum = float("nan")
    reduction = 100.0 * (1.0 - actual / uniform) if uniform > 0 else 0.0
    optimum_reduction = 100.0 * (1.0 - optimum / uniform) if uniform > 0 else 0.0
    return {"se_actual": actual, "se_uniform": uniform, "se_sqrt": optimum,
            "se_reduction_pct": reduction, "se_sqrt_reduction_pct": optimum_reduction}


def effective_support(weights_G: np.ndarray) -> float:
    """exp(entropy) of the normalised weights: 1 for a point mass, G for uniform."""
    p = normalized(weights_G)
    p = p[p > 0]
    return float(np.exp(-np.sum(p * np.log(p))))


def worst_group(values_G: np.ndarray) -> float:
    """Minimum over groups that have a value (NaN when none has)."""
    values = np.asarray(values_G, float)
    finite = values[np.isfinite(values)]
    return float(finite.min()) if finite.size else float("nan")


def tail_average(values_TG: np.ndarray, quantile: float = 0.6) -> np.ndarray:
    """Fig. 1 bars: mean over the steps at or after the given quantile of the step range."""
    values = np.asarray(values_TG, float)
    start = int(np.floor(quantile * values.shape[0]))
    return np.nanmean(values[start:], axis=0)


def snapshot_steps(num_steps: int) -> dict[str, int]:
    """Fig. 5 snapshot rows: start, early-mid (1/3), late-mid (2/3) and end step indices."""
    last = max(num_steps - 1, 0)
    return {"start": 0, "early-mid": last // 3, "late-mid": (2 * last) // 3, "end": last}
