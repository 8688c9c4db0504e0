"""Diagnostics of the paper as pure functions (§5 figures; Eq. 32-33).

Shapes: ``G`` bins, ``P`` prompts, ``R`` rollouts (flat, ragged by ``counts_P``), ``T`` steps.
Empty bins give NaN for means; shares and weights are plain arrays over all G bins.
Inputs are checked (gdro_lab.checks): bins outside [-1, G), NaN/negative/zero-sum weights, an
active bin without sigma or rollouts in the SE proxy are one-line errors, never dropped silently.
"""

from __future__ import annotations

import math

import numpy as np

from gdro_lab._validate import ConfigError
from gdro_lab.allocation.sqrt_law import check_box, sqrt_law
from gdro_lab.checks import as_float_array, check_bins


def bin_counts(bins_P: np.ndarray, num_bins: int) -> np.ndarray:
    """Prompts per bin; unassigned prompts (bin -1) are not counted."""
    bins = check_bins("bin_counts", "bins_P", bins_P, num_bins)
    return np.bincount(bins[bins >= 0], minlength=num_bins).astype(float)


def bin_share(bins_P: np.ndarray, num_bins: int) -> np.ndarray:
    """Realized share q_hat_t(b) = |B_b,t| / |B_t| over assigned prompts (zeros if none)."""
    counts = bin_counts(bins_P, num_bins)
    total = counts.sum()
    return counts / total if total > 0 else counts


def bin_mean(values_P: np.ndarray, bins_P: np.ndarray, num_bins: int) -> np.ndarray:
    """Mean of a per-prompt value within each bin (Eq. 13); NaN where a bin is empty."""
    bins = check_bins("bin_mean", "bins_P", bins_P, num_bins)
    values = np.asarray(values_P, float)
    if values.shape != bins.shape:
        raise ConfigError(f"bin_mean: values_P has shape {values.shape}: must match bins_P {bins.shape}")
    keep = bins >= 0
    sums = np.bincount(bins[keep], weights=values[keep], minlength=num_bins)
    counts = np.bincount(bins[keep], minlength=num_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def normalized(weights_G: np.ndarray | list[float], owner: str = "normalized", name: str = "weights_G") -> np.ndarray:
    """Non-negative finite weights scaled to sum to one; an empty, negative or zero-sum input is an error.
    A non-empty 1-D float64 array is checked by its sum and minimum alone (the step record's per-step call)."""
    w = weights_G
    if isinstance(w, np.ndarray) and w.dtype == np.float64 and w.ndim == 1 and w.size:
        total = np.add.reduce(w)
        if math.isfinite(total) and total > 0 and np.minimum.reduce(w) >= 0:  # a NaN or inf makes the sum non-finite
            return w / total
    w = as_float_array(owner, name, weights_G, ndim=1, nonnegative=True, nonempty=True)
    total = w.sum()
    if not total > 0:
        raise ConfigError(f"{owner}: {name} sums to {total:g}: must have a positive sum")
    return w / total


def lead_lag_gap(weights_G: np.ndarray | list[float], share_G: np.ndarray | list[float]) -> tuple[float, float, float]:
    """Eq. 32: (gap, mu_weight, mu_data) with mu_weight = sum_b b w_hat(b), mu_data = sum_b b q(b).

    ``weights_G`` are the Prompt-GDRO bin weights (normalised here, not multiplied by the
    share); ``share_G`` the empirical prompt share. A positive gap means the adversary sits
    on higher-index (more solvable) bins than the data. Lists of Python floats (the step record's
    per-step call, G ~ 10 bins, weights and share already checked) are summed in plain Python; equal
    to the array path up to rounding.
    """
    if isinstance(weights_G, list) and isinstance(share_G, list):
        if len(share_G) != len(weights_G):
            raise ConfigError(f"lead_lag_gap: share_G has {len(share_G)} bins: must match weights_G ({len(weights_G)})")
        weight_total, share_total = sum(weights_G), sum(share_G)
        mu_weight = sum([b * (w / weight_total) for b, w in enumerate(weights_G)])
        mu_data = sum([b * q / share_total for b, q in enumerate(share_G)])
        return mu_weight - mu_data, mu_weight, mu_data
    weights = normalized(weights_G, "lead_lag_gap", "weights_G")
    share = normalized(share_G, "lead_lag_gap", "share_G")
    if share.shape != weights.shape:
        raise ConfigError(f"lead_lag_gap: share_G has {share.size} bins: must match weights_G ({weights.size})")
    index = np.arange(weights.size, dtype=float)
    mu_weight = float(index @ weights)
    mu_data = float(index @ share)
    return mu_weight - mu_data, mu_weight, mu_data


def _se_inputs(owner: str, share_G: np.ndarray, second_G: np.ndarray, second: str,
               n_G: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validated (q, sigma or v, n): same shapes; on bins with q > 0 a finite value >= 0 and n > 0."""
    q = as_float_array(owner, "share_G", share_G, ndim=1, nonnegative=True)
    x = as_float_array(owner, second, second_G, ndim=1, allow_nan=True)
    n = as_float_array(owner, "n_G", n_G, ndim=1, allow_nan=True)
    if not q.shape == x.shape == n.shape:
        raise ConfigError(f"{owner}: share_G {q.shape}, {second} {x.shape} and n_G {n.shape} must have one "
                          "entry per bin")
    active = q > 0
    if not (np.isfinite(x[active]).all() and (x[active] >= 0).all()):
        raise ConfigError(f"{owner}: {second} is NaN or negative on a bin with prompts: must be finite and >= 0 "
                          "where share_G > 0 (leave unknown bins out, or give them 0 share)")
    if not (np.isfinite(n[active]).all() and (n[active] > 0).all()):
        raise ConfigError(f"{owner}: n_G is invalid on a bin with prompts: must be finite and > 0 where share_G > 0")
    return q, x, n


def se_proxy(share_G: np.ndarray, sigma_G: np.ndarray, n_G: np.ndarray) -> float:
    """Eq. 33: WSE = sum_b q_b sigma_b / sqrt(n_b) over bins with q_b > 0 (each needs sigma, n)."""
    q, s, n = _se_inputs("se_proxy", share_G, sigma_G, "sigma_G", n_G)
    live = q > 0
    return float(np.sum(q[live] * s[live] / np.sqrt(n[live])))


def variance_proxy(share_G: np.ndarray, variance_G: np.ndarray, n_G: np.ndarray) -> float:
    """Eq. 28: VarProxy = sum_b q_b v_b / n_b (the quantity the square-root law minimises)."""
    q, v, n = _se_inputs("variance_proxy", share_G, variance_G, "variance_G", n_G)
    live = q > 0
    return float(np.sum(q[live] * v[live] / n[live]))


def se_report(share_G: np.ndarray | list[float], sigma_G: np.ndarray | list[float], n_G: np.ndarray | list[float],
              n_bar: float, n_min: float, n_max: float) -> dict[str, float]:
    """WSE for the allocation used, for uniform n_bar, and for the square-root optimum (Thm 4.2, v_b = sigma_b^2).

    Bins whose sigma is unknown (NaN) are left out of all three alike; with none known every value is NaN.
    ``reduction_pct`` is 100 (1 - WSE_actual / WSE_uniform) as in the paper. Detail:
    docs/core-controllers-notes.md#gdro_lab-functional-diagnostics.

    Lists of Python floats that are plainly valid (every sigma known, the step record's per-step call) are
    checked in plain Python and go to :func:`se_terms`' list path.
    """
    if isinstance(share_G, list) and isinstance(sigma_G, list) and isinstance(n_G, list) and n_bar > 0 \
            and _plainly_valid(share_G, sigma_G, n_G):
        check_box("sqrt_allocation", n_bar, n_min, n_max)
        return se_terms(share_G, sigma_G, n_G, n_bar, n_min, n_max)
    q = as_float_array("se_report", "share_G", share_G, ndim=1, nonnegative=True)
    sigma = as_float_array("se_report", "sigma_G", sigma_G, ndim=1, allow_nan=True)
    n = as_float_array("se_report", "n_G", n_G, ndim=1, allow_nan=True)
    known = np.isfinite(sigma) if sigma.shape == q.shape else np.ones(q.shape, bool)
    q_known = np.where(known, q, 0.0)
    if not q_known.sum() > 0:
        return dict.fromkeys(SE_KEYS, float("nan"))
    sigma = np.where(known, sigma, 0.0)
    n = np.where(known, n, 1.0)
    _se_inputs("se_proxy", q_known, sigma, "sigma_G", n)  # the checks of the three se_proxy terms, once
    if not float(n_bar) > 0:
        _se_inputs("se_proxy", q_known, sigma, "sigma_G", np.full(q.size, float(n_bar)))
    check_box("sqrt_allocation", n_bar, n_min, n_max)
    return se_terms(q_known, sigma, n, n_bar, n_min, n_max)


def multiplier_moments(multipliers_P: np.ndarray, active_P: np.ndarray | None = None) -> tuple[float, float]:
    """(E_i[m_i], sum_i a_i m_i^2 / sum_i a_i) of one step: the step record's ``multiplier_mean`` and
    ``multiplier_sq_mean`` (studykit.stepmatch matches runs by them).

    ``active_P`` = a_i, the rollouts of prompt i that carry an advantage (n_i, or 0 for a group of
    all-equal rewards); None weights every prompt equally. NaN second moment when no prompt carries one.
    """
    m = np.asarray(multipliers_P, float)
    if m.size == 0:
        return float("nan"), float("nan")
    a = np.ones(m.size) if active_P is None else np.asarray(active_P, float)
    total = float(np.add.reduce(a))
    second = float(np.add.reduce(a * m * m)) / total if total > 0 else float("nan")
    return float(np.add.reduce(m)) / m.size, second


def _plainly_valid(q: list[float], sigma: list[float], n: list[float]) -> bool:
    """One number per bin in each; q finite >= 0 with a positive sum; sigma finite >= 0; n finite > 0 where q > 0."""
    def real(x: object) -> bool:
        return type(x) in (float, int) and math.isfinite(x)  # type: ignore[arg-type]
    return (len(q) == len(sigma) == len(n) and all(real(x) and x >= 0 for x in q + sigma) and sum(q) > 0
            and all(real(m) and m > 0 for m, share in zip(n, q) if share > 0))


SE_KEYS = ("se_actual", "se_uniform", "se_sqrt", "se_reduction_pct", "se_sqrt_reduction_pct")


def se_terms(q_G: np.ndarray | list[float], sigma_G: np.ndarray | list[float], n_G: np.ndarray | list[float],
             n_bar: float, n_min: float, n_max: float) -> dict[str, float]:
    """:func:`se_report` on checked inputs: q >= 0 with a positive sum; sigma >= 0 and n > 0, finite, on
    bins with q > 0; a valid arm box (unchecked; the step record calls this). Same arithmetic as
    three :func:`se_proxy` calls (sqrt of a constant n_bar is the scalar's sqrt, correctly rounded either way).

    Lists of Python floats (the step record's per-step call, G ~ 10 bins) are summed in plain Python,
    where numpy's per-call cost exceeds the arithmetic; equal to the array sums up to rounding.
    """
    # square-root law; bins it sends to n = 0 (zero variance, n_min = 0) get n_bar (their term is 0)
    if isinstance(q_G, list) and isinstance(sigma_G, list) and isinstance(n_G, list):
        live = [q > 0 for q in q_G]
        weighted = [q * s for q, s, ok in zip(q_G, sigma_G, live) if ok]
        actual = sum(w / math.sqrt(n) for w, n in zip(weighted, [n for n, ok in zip(n_G, live) if ok]))
        root_bar = math.sqrt(n_bar)
        uniform = sum(w / root_bar for w in weighted)
        law = sqrt_law([s * s for s in sigma_G], q_G, n_bar, n_min, n_max).tolist()
        n_opt = [n for n, ok in zip(law, live) if ok]
        optimum = sum(w / math.sqrt(n if n > 0 else float(n_bar)) for w, n in zip(weighted, n_opt))
    else:
        q, sigma, n = np.asarray(q_G, float), np.asarray(sigma_G, float), np.asarray(n_G, float)
        live_G = q > 0
        weighted_G = q[live_G] * sigma[live_G]  # q_b sigma_b on the bins with prompts
        actual = float(np.sum(weighted_G / np.sqrt(n[live_G])))
        uniform = float(np.sum(weighted_G / math.sqrt(n_bar)))
        n_law = sqrt_law(sigma**2, q, n_bar, n_min, n_max)[live_G]
        optimum = float(np.sum(weighted_G / np.sqrt(np.where(n_law > 0, n_law, float(n_bar)))))
    reduction = 100.0 * (1.0 - actual / uniform) if uniform > 0 else 0.0
    optimum_reduction = 100.0 * (1.0 - optimum / uniform) if uniform > 0 else 0.0
    return {"se_actual": actual, "se_uniform": uniform, "se_sqrt": optimum,
            "se_reduction_pct": reduction, "se_sqrt_reduction_pct": optimum_reduction}


def effective_support(weights_G: np.ndarray) -> float:
    """exp(entropy) of the normalised weights: 1 for a point mass, G for uniform."""
    normalized(weights_G)  # the checks
    return support_of_distribution(np.asarray(weights_G, float))


def support_of_distribution(weights_G: np.ndarray | list[float]) -> float:
    """:func:`effective_support` of weights already known to be finite, >= 0, with a positive sum (unchecked).

    A list of Python floats (the per-step metric over G ~ 10 bins) is summed in plain Python, where
    numpy's per-call cost dominates; equal to the array form up to rounding (the sums run in another order).
    """
    if isinstance(weights_G, list):
        total = sum(weights_G)
        entropy = 0.0
        for w in weights_G:
            p = w / total
            if p > 0:  # (a subnormal w can give p = 0)
                entropy -= p * math.log(p)
        return math.exp(entropy)
    return support_of_normalized(weights_G / weights_G.sum())


def support_of_normalized(p_G: np.ndarray) -> float:
    """exp(entropy) of a probability vector (unchecked)."""
    p = p_G[p_G > 0]
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
