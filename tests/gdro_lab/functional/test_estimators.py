"""Tests of gdro_lab.functional.estimators against independent references (math.comb, scipy, naive loops)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from gdro_lab import ConfigError
from gdro_lab.functional.estimators import (beta_passk_posterior, bin_of, edge_thresholds, hysteresis_bins,
                                            hysteresis_movers, pass_at_k)

PROPERTY = settings(max_examples=150, deadline=None)


# ----------------------------------------------------------------------------- references

def passk_exact(n: int, c: int, k: int) -> float:
    """1 - C(n-c, k) / C(n, k) with exact rational arithmetic (math.comb(m, k) = 0 for m < k)."""
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


def bin_of_naive(value: float, edges: list[float]) -> int:
    """Bin b holds [a_b, a_{b+1}): count the edges that are <= value (equal goes up)."""
    b = 0
    for edge in edges:
        if value >= edge:
            b += 1
    return b


def hysteresis_naive(previous, center, low, high, edges) -> list[int]:
    out = []
    for prev, c, lo, hi in zip(previous, center, low, high):
        if prev < 0:
            out.append(bin_of_naive(c, edges))
            continue
        up = bin_of_naive(lo, edges)
        down = bin_of_naive(hi, edges)
        if up > prev:
            out.append(up)
        elif down < prev:
            out.append(down)
        else:
            out.append(int(prev))
    return out


def passk_posterior_mean_quad(a: float, b: float, k: int) -> float:
    value, _ = integrate.quad(lambda p: (1.0 - (1.0 - p) ** k) * stats.beta.pdf(p, a, b), 0.0, 1.0,
                              epsabs=1e-13, epsrel=1e-11, limit=200)
    return value


edges_strategy = st.lists(st.floats(0.01, 0.99), min_size=1, max_size=9, unique=True).map(sorted).filter(
    lambda e: all(b - a > 1e-6 for a, b in zip(e[:-1], e[1:])))


# ----------------------------------------------------------------------------- pass@k

def test_pass_at_k_exhaustive_small_against_math_comb():
    for n in range(1, 13):
        for k in range(1, n + 1):
            c = np.arange(n + 1)
            got = pass_at_k(np.full(n + 1, n), c, k)
            want = [passk_exact(n, int(ci), k) for ci in c]
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, err_msg=f"n={n} k={k}")


@PROPERTY
@given(st.data())
def test_pass_at_k_property_against_math_comb(data):
    n = data.draw(st.integers(1, 40), label="n")
    k = data.draw(st.integers(1, n), label="k")
    c = data.draw(st.integers(0, n), label="c")
    got = float(pass_at_k(n, c, k))
    assert got == pytest.approx(passk_exact(n, c, k), rel=1e-9, abs=1e-12)


@PROPERTY
@given(st.data())
def test_pass_at_k_large_n_against_math_comb(data):
    # n above the exact lookup table's limit exercises the log-gamma path
    n = data.draw(st.integers(60, 400), label="n")
    k = data.draw(st.integers(1, min(n, 64)), label="k")
    c = data.draw(st.integers(0, n), label="c")
    got = float(pass_at_k(n, c, k))
    assert got == pytest.approx(passk_exact(n, c, k), rel=1e-9, abs=1e-12)


def test_pass_at_k_mixed_small_and_large_n():
    n = np.array([2, 4, 8, 64, 65, 100, 300])
    c = np.array([1, 0, 3, 10, 65, 1, 150])
    np.testing.assert_allclose(pass_at_k(n, c, 2), [passk_exact(int(a), int(b), 2) for a, b in zip(n, c)],
                               rtol=1e-10, atol=1e-12)
    small = [passk_exact(int(a), int(b), 2) for a, b in zip(n[:4], c[:4])]
    np.testing.assert_allclose(pass_at_k(n[:4], c[:4], 2), small, rtol=1e-12, atol=1e-14)


@PROPERTY
@given(st.data())
def test_pass_at_k_vectorised_ragged_matches_scalar(data):
    k = data.draw(st.integers(1, 4), label="k")
    n = np.array(data.draw(st.lists(st.integers(k, 16), min_size=1, max_size=20), label="n"))
    c = np.array([data.draw(st.integers(0, int(ni))) for ni in n])
    got = pass_at_k(n, c, k)
    assert got.shape == n.shape
    np.testing.assert_allclose(got, [passk_exact(int(a), int(b), k) for a, b in zip(n, c)],
                               rtol=1e-9, atol=1e-12)


@PROPERTY
@given(n=st.integers(1, 30), data=st.data())
def test_pass_at_k_monotone_in_successes_and_k(n, data):
    k = data.draw(st.integers(1, n), label="k")
    values = pass_at_k(np.full(n + 1, n), np.arange(n + 1), k)
    assert np.all(np.diff(values) >= -1e-12)
    assert values[0] == pytest.approx(0.0, abs=1e-12)
    assert values[-1] == 1.0
    if k < n:  # more draws can only raise pass@k
        larger = pass_at_k(np.full(n + 1, n), np.arange(n + 1), k + 1)
        assert np.all(larger >= values - 1e-12)


@pytest.mark.parametrize("n", [1, 2, 4, 7, 12])
def test_pass_at_1_is_success_rate(n):
    c = np.arange(n + 1)
    np.testing.assert_allclose(pass_at_k(np.full(n + 1, n), c, 1), c / n, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("n, c, k", [
    (4, 0, 5),          # k > n
    (2, 1, 3),
    (4, 5, 2),          # c > n
    (4, -1, 2),         # c < 0
    (4, 2, 0),          # k < 1
    (np.array([4, 2]), np.array([1, 1]), 3),   # one prompt with fewer than k rollouts
    (np.array([4, 4]), np.array([1, 5]), 2),   # one prompt with c > n
])
def test_pass_at_k_rejects_invalid(n, c, k):
    with pytest.raises(ConfigError) as info:
        pass_at_k(n, c, k)
    assert "\n" not in str(info.value)


# ----------------------------------------------------------------------------- Beta posterior

@settings(max_examples=60, deadline=None)
@given(s=st.integers(0, 25), f=st.integers(0, 25), k=st.integers(1, 8),
       prior_a=st.floats(0.5, 3.0), prior_b=st.floats(0.5, 3.0), credible=st.floats(0.5, 0.98))
def test_beta_posterior_mean_and_interval_against_scipy(s, f, k, prior_a, prior_b, credible):
    mean, low, high = beta_passk_posterior(np.array([s]), np.array([f]), k, prior_a, prior_b, credible)
    a, b = prior_a + s, prior_b + f
    assert mean[0] == pytest.approx(passk_posterior_mean_quad(a, b, k), rel=1e-7, abs=1e-10)
    tail = 0.5 * (1.0 - credible)
    p_low, p_high = stats.beta.ppf([tail, 1.0 - tail], a, b)
    assert low[0] == pytest.approx(1.0 - (1.0 - p_low) ** k, rel=1e-7, abs=1e-10)
    assert high[0] == pytest.approx(1.0 - (1.0 - p_high) ** k, rel=1e-7, abs=1e-10)
    assert 0.0 <= low[0] <= high[0] <= 1.0


@PROPERTY
@given(s=st.integers(0, 60), f=st.integers(0, 60), k=st.integers(1, 3),
       prior_a=st.floats(0.5, 3.0), prior_b=st.floats(0.5, 3.0), credible=st.floats(0.8, 0.99))
def test_beta_posterior_mean_inside_interval_for_classifier_settings(s, f, k, prior_a, prior_b, credible):
    # Holds for the classifier's regime (k <= 3, credible >= 0.8); see the next test for why not always.
    mean, low, high = beta_passk_posterior(np.array([s]), np.array([f]), k, prior_a, prior_b, credible)
    assert low[0] <= mean[0] <= high[0]


def test_beta_posterior_mean_can_lie_outside_central_interval_when_skewed():
    # Not a code error: for a skewed posterior (8 successes, 0 failures, k = 4) the mean of
    # pass@k = 1 - (1 - p)^k falls below the central 80% interval. Pinned so the behaviour is known.
    mean, low, high = beta_passk_posterior(np.array([8]), np.array([0]), 4, 0.5, 0.5, 0.8)
    assert mean[0] == pytest.approx(passk_posterior_mean_quad(8.5, 0.5, 4), rel=1e-8)
    assert mean[0] < low[0] < high[0]


def test_beta_posterior_vectorised_matches_elementwise():
    rng = np.random.default_rng(0)
    s = rng.integers(0, 20, 30)
    f = rng.integers(0, 20, 30)
    mean, low, high = beta_passk_posterior(s, f, 2, 1.0, 1.0, 0.8)
    for i in range(s.size):
        m1, l1, h1 = beta_passk_posterior(np.array([s[i]]), np.array([f[i]]), 2, 1.0, 1.0, 0.8)
        assert (mean[i], low[i], high[i]) == pytest.approx((m1[0], l1[0], h1[0]), rel=1e-12)
    # more successes, same failures: every output is non-decreasing
    m_up, l_up, h_up = beta_passk_posterior(s + 1, f, 2, 1.0, 1.0, 0.8)
    assert np.all(m_up >= mean) and np.all(l_up >= low) and np.all(h_up >= high)


# ----------------------------------------------------------------------------- bins

@PROPERTY
@given(edges=edges_strategy, data=st.data())
def test_bin_of_against_naive_loop(edges, data):
    # values include every edge exactly, 0, 1 and random points
    extra = data.draw(st.lists(st.floats(0.0, 1.0), max_size=20), label="values")
    values = np.array(extra + list(edges) + [0.0, 1.0])
    got = bin_of(values, np.array(edges))
    assert got.tolist() == [bin_of_naive(v, edges) for v in values]


def test_bin_of_edge_goes_to_upper_bin_and_bin_zero_is_hardest():
    edges = np.array([0.1, 0.5, 0.9])
    assert bin_of(np.array([0.0, 0.0999, 0.1, 0.4999, 0.5, 0.9, 1.0]), edges).tolist() == [0, 0, 1, 1, 2, 3, 3]


def _draw_bins_and_bands(edges, data, most: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(previous bins in -1..B-1, band centers in [0, 1], half-widths in [0, 0.3], P) for P <= ``most`` prompts."""
    size = data.draw(st.integers(1, most), label="P")
    previous = np.array(data.draw(st.lists(st.integers(-1, len(edges)), min_size=size, max_size=size)))
    center = np.array(data.draw(st.lists(st.floats(0.0, 1.0), min_size=size, max_size=size)))
    delta = np.array(data.draw(st.lists(st.floats(0.0, 0.3), min_size=size, max_size=size)))
    return previous, center, delta, size


@PROPERTY
@given(edges=edges_strategy, data=st.data())
def test_hysteresis_bins_against_naive_loop(edges, data):
    previous, center, delta, size = _draw_bins_and_bands(edges, data, 25)
    # band snapping onto edges is the interesting case: sometimes use an edge exactly
    snap = data.draw(st.lists(st.booleans(), min_size=size, max_size=size))
    for i, flag in enumerate(snap):
        if flag:
            center[i] = edges[i % len(edges)]
    low, high = center - delta, center + delta
    got = hysteresis_bins(previous, center, low, high, np.array(edges))
    assert got.tolist() == hysteresis_naive(previous, center, low, high, edges)


@PROPERTY
@given(edges=edges_strategy, data=st.data())
def test_hysteresis_movers_equal_hysteresis_bins(edges, data):
    # the classifier's per-step path: only the prompts whose band clears an edge of their own bin are searched
    previous, center, delta, size = _draw_bins_and_bands(edges, data, 40)
    snap = data.draw(st.lists(st.integers(-1, 2 * len(edges) - 1), min_size=size, max_size=size))
    for i, at in enumerate(snap):  # band ends exactly on an edge: the boundary of both comparisons
        if at >= 0:
            center[i] = edges[at] + delta[i] if at < len(edges) else edges[at - len(edges)] - delta[i]
    low, high = center - delta, center + delta
    edges_array = np.array(edges)
    movers, moved_to, fresh = hysteresis_movers(previous, center, low, high, edges_array, *edge_thresholds(edges_array))
    new = previous.copy()
    new[movers] = moved_to
    expected = hysteresis_bins(previous, center, low, high, edges_array)
    assert new.tolist() == expected.tolist()
    # every mover changes bin, so the classifier's moves metric is len(movers) - fresh
    assert (moved_to != previous[movers]).all() and fresh == int((previous < 0).sum())


def test_hysteresis_margin_rule_by_hand():
    # binary fractions so that band ends land exactly on the edge
    edges = np.array([0.5])
    delta = 0.125
    center = np.array([0.5625, 0.625, 0.4375, 0.375, 0.3125, 0.375, 0.5])
    previous = np.array([0, 0, 1, 1, 1, -1, -1])
    got = hysteresis_bins(previous, center, center - delta, center + delta, edges)
    # 0.5625 - delta < edge: stays; 0.625 - delta = edge: moves up (edge goes to the upper bin);
    # 0.4375 + delta > edge: stays; 0.375 + delta = edge: not below it, stays;
    # 0.3125 + delta < edge: moves down; new prompts take bin_of(center)
    assert got.tolist() == [0, 1, 1, 1, 0, 0, 1]


# ----------------------------------------------------------------------------- pass@k: one value per (n, c, k)

@pytest.mark.parametrize("n,c,k", [(100, 98, 2), (100, 99, 2), (100, 97, 3), (65, 63, 2), (200, 190, 8)])
def test_pass_at_k_near_all_correct_on_the_large_n_path(n, c, k):
    """fail = n - c close to k: pass@k = 1 - C(fail, k)/C(n, k) < 1 when fail >= k (exact fraction)."""
    got = float(pass_at_k(n, c, k))
    assert got == passk_exact(n, c, k)
    assert (got < 1.0) == (n - c >= k)


def test_pass_at_k_same_value_whatever_the_batch():
    rng = np.random.default_rng(3)
    for _ in range(200):
        k = int(rng.integers(1, 5))
        n = int(rng.integers(k, 40))
        c = int(rng.integers(0, n + 1))
        alone = float(pass_at_k(n, c, k))
        with_large = float(pass_at_k(np.array([n, 150]), np.array([c, 7]), k)[0])
        assert alone == with_large == passk_exact(n, c, k)


@pytest.mark.parametrize("n", [2, 8, 64, 65, 100, 1000])
def test_pass_at_k_extremes_are_exact(n):
    for k in (1, 2, min(n, 8)):
        assert float(pass_at_k(n, 0, k)) == 0.0
        for c in range(max(n - k + 1, 0), n + 1):
            assert float(pass_at_k(n, c, k)) == 1.0
        # a batch mixing both paths gives the same exact extremes
        mixed = pass_at_k(np.array([n, n, 150]), np.array([0, n, 0]), k)
        assert mixed[0] == 0.0 and mixed[1] == 1.0 and mixed[2] == 0.0
