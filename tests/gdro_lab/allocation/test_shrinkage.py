"""Empirical-Bayes moments against a naive loop and against a known Beta population."""

from __future__ import annotations

import numpy as np
import pytest

from gdro_lab.allocation.shrinkage import beta_prior, bin_rate_moments, shrunk_variance


def naive_moments(s, n, bins, num_bins):
    means, taus = [], []
    for b in range(num_bins):
        idx = [i for i in range(len(bins)) if bins[i] == b and n[i] > 0]
        if not idx:
            means.append(np.nan)
            taus.append(np.nan)
            continue
        m = sum(s[i] for i in idx) / sum(n[i] for i in idx)
        rates = [s[i] / n[i] for i in idx]
        if len(idx) < 2:
            means.append(m)
            taus.append(np.nan)
            continue
        var = np.var(rates, ddof=1)
        inv = np.mean([1 / n[i] for i in idx])
        means.append(m)
        taus.append(max(0.0, (var - m * (1 - m) * inv) / (1 - inv)))
    return np.array(means), np.array(taus)


def test_moments_match_a_naive_loop():
    rng = np.random.default_rng(0)
    bins = rng.integers(-1, 4, 60)
    n = rng.integers(0, 12, 60).astype(float)
    s = np.floor(rng.random(60) * (n + 1))
    mean, tau2, _ = bin_rate_moments(s, n, bins, 4)
    ref_mean, ref_tau2 = naive_moments(s, n, bins, 4)
    np.testing.assert_allclose(mean, ref_mean, equal_nan=True)
    np.testing.assert_allclose(tau2, ref_tau2, equal_nan=True, atol=1e-12)


def test_pooled_moments_cover_every_prompt():
    rng = np.random.default_rng(3)
    bins = rng.integers(-1, 4, 50)
    n = rng.integers(1, 12, 50).astype(float)
    s = np.floor(rng.random(50) * (n + 1))
    mean, tau2, count = bin_rate_moments(s, n, bins, 4, pooled=True)
    ref_mean, ref_tau2 = naive_moments(s, n, np.zeros(50, int), 1)
    assert mean.size == 5 and count[-1] == 50
    assert mean[-1] == pytest.approx(ref_mean[0]) and tau2[-1] == pytest.approx(ref_tau2[0], abs=1e-12)
    np.testing.assert_allclose(mean[:4], bin_rate_moments(s, n, bins, 4)[0])


def test_moments_recover_a_beta_population():
    rng = np.random.default_rng(1)
    p = rng.beta(2.0, 6.0, 40_000)           # mean 0.25, var = 12 / (64 * 9) = 0.02083
    n = rng.integers(4, 13, p.size).astype(float)
    s = rng.binomial(n.astype(int), p).astype(float)
    mean, tau2, _ = bin_rate_moments(s, n, np.zeros(p.size, np.int64), 1)
    assert mean[0] == pytest.approx(0.25, abs=0.003)
    assert tau2[0] == pytest.approx(12 / (64 * 9), rel=0.05)
    alpha, beta = beta_prior(mean, tau2, 0.5, 500)
    assert alpha[0] == pytest.approx(2.0, rel=0.1) and beta[0] == pytest.approx(6.0, rel=0.1)


def test_shrunk_variance_by_hand():
    # prior Beta(1, 3), 2 successes in 4: posterior Beta(3, 5), E[4 p(1-p)] = 4 * 15 / (8 * 9)
    assert float(shrunk_variance(1.0, 3.0, 2.0, 4.0)) == pytest.approx(60 / 72)
    # no history: the prior's own expected variance
    assert float(shrunk_variance(1.0, 3.0, 0.0, 0.0)) == pytest.approx(4 * 3 / (4 * 5))


def test_identical_prompts_shrink_to_the_strongest_prior():
    alpha, beta = beta_prior(np.array([0.3]), np.array([0.0]), 0.5, 500)
    assert alpha[0] + beta[0] == pytest.approx(500) and alpha[0] / 500 == pytest.approx(0.3)
