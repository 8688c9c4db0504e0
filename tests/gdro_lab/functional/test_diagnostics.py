"""Tests of gdro_lab.functional.diagnostics (paper §4, Eq. 28, 32, 33) against loops and hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gdro_lab._validate import ConfigError
from gdro_lab.allocation.sqrt_law import sqrt_allocation
from gdro_lab.functional.diagnostics import (bin_counts, bin_mean, bin_share, effective_support, lead_lag_gap,
                                             normalized, se_proxy, se_report, snapshot_steps, tail_average,
                                             variance_proxy, worst_group)

PROPERTY = settings(max_examples=120, deadline=None)


@st.composite
def binned(draw):
    num_bins = draw(st.integers(1, 10))
    size = draw(st.integers(0, 40))
    bins = draw(st.lists(st.integers(-1, num_bins - 1), min_size=size, max_size=size))
    values = draw(st.lists(st.floats(-100, 100), min_size=size, max_size=size))
    return np.array(bins, np.int64), np.array(values, float), num_bins


# ----------------------------------------------------------------------------- per-bin aggregates

@PROPERTY
@given(binned())
def test_bin_counts_share_mean_against_loops(data):
    bins, values, num_bins = data
    counts = [0.0] * num_bins
    sums = [0.0] * num_bins
    for b, v in zip(bins, values):
        if b >= 0:  # unassigned prompts (-1) are in no bin
            counts[b] += 1
            sums[b] += v
    assigned = sum(counts)
    np.testing.assert_array_equal(bin_counts(bins, num_bins), counts)
    want_share = [c / assigned for c in counts] if assigned else [0.0] * num_bins
    np.testing.assert_allclose(bin_share(bins, num_bins), want_share, rtol=1e-12)
    want_mean = [s / c if c else math.nan for s, c in zip(sums, counts)]
    np.testing.assert_allclose(bin_mean(values, bins, num_bins), want_mean, rtol=1e-9, atol=1e-9)
    assert bin_counts(bins, num_bins).shape == (num_bins,)


def test_bin_mean_empty_bin_is_nan_and_unassigned_ignored():
    got = bin_mean(np.array([1.0, 3.0, 100.0, 5.0]), np.array([0, 0, -1, 2]), 4)
    assert got[0] == 2.0 and np.isnan(got[1]) and got[2] == 5.0 and np.isnan(got[3])
    np.testing.assert_array_equal(bin_share(np.array([-1, -1]), 3), [0.0, 0.0, 0.0])


# ----------------------------------------------------------------------------- lead-lag gap (Eq. 32)

def test_lead_lag_gap_by_hand():
    weights = np.array([1.0, 1.0, 2.0])       # normalised: (1/4, 1/4, 1/2) -> mu_weight = 1/4 + 1 = 1.25
    share = np.array([0.5, 0.5, 0.0])          # mu_data = 0.5
    gap, mu_weight, mu_data = lead_lag_gap(weights, share)
    assert (mu_weight, mu_data) == pytest.approx((1.25, 0.5))
    assert gap == pytest.approx(0.75)


@PROPERTY
@given(st.data())
def test_lead_lag_gap_against_loop(data):
    num_bins = data.draw(st.integers(1, 12))
    weights = data.draw(st.lists(st.floats(0.0, 10.0), min_size=num_bins, max_size=num_bins))
    share = data.draw(st.lists(st.floats(0.0, 10.0), min_size=num_bins, max_size=num_bins))
    assume(sum(weights) > 1e-6 and sum(share) > 1e-6)
    mu_weight = sum(b * w for b, w in enumerate(weights)) / sum(weights)
    mu_data = sum(b * q for b, q in enumerate(share)) / sum(share)
    gap, got_weight, got_data = lead_lag_gap(np.array(weights), np.array(share))
    assert got_weight == pytest.approx(mu_weight, rel=1e-9, abs=1e-12)
    assert got_data == pytest.approx(mu_data, rel=1e-9, abs=1e-12)
    assert gap == pytest.approx(mu_weight - mu_data, rel=1e-9, abs=1e-9)


def test_normalized_zero_weights_is_an_error_not_uniform():
    """Zero-sum weights used to become uniform silently; now a one-line error (tests/gdro_lab/test_bad_inputs.py)."""
    with pytest.raises(ValueError, match="weights_G"):
        normalized(np.zeros(4))
    np.testing.assert_allclose(normalized(np.array([2.0, 6.0])), [0.25, 0.75])


# ----------------------------------------------------------------------------- SE proxy (Eq. 28, 33)

def test_se_proxy_and_variance_proxy_by_hand():
    share = np.array([0.5, 0.25, 0.25, 0.0])
    sigma = np.array([2.0, 1.0, 0.0, np.nan])   # a zero-share bin may have no sigma and no rollouts
    n = np.array([4.0, 1.0, 9.0, 0.0])
    assert se_proxy(share, sigma, n) == pytest.approx(0.5 * 2 / 2 + 0.25 * 1 / 1)
    assert variance_proxy(share, sigma**2, n) == pytest.approx(0.5 * 4 / 4 + 0.25 * 1 / 1)
    with pytest.raises(ValueError, match="sigma_G"):  # an active bin with unknown sigma is not dropped silently
        se_proxy(share, np.array([2.0, np.nan, 0.0, 0.0]), n)


@PROPERTY
@given(st.data())
def test_se_proxy_against_loop(data):
    num_bins = data.draw(st.integers(1, 10))
    share = data.draw(st.lists(st.floats(0.0, 1.0), min_size=num_bins, max_size=num_bins))
    sigma = data.draw(st.lists(st.floats(0.0, 3.0) | st.just(math.nan), min_size=num_bins, max_size=num_bins))
    n = data.draw(st.lists(st.integers(0, 12), min_size=num_bins, max_size=num_bins))
    # active bins need a sigma and rollouts (tests/gdro_lab/test_bad_inputs.py); inactive ones may lack both
    sigma = [s if q == 0 or math.isfinite(s) else 1.0 for q, s in zip(share, sigma)]
    n = [m if q == 0 or m > 0 else 1 for q, m in zip(share, n)]
    want_se = sum(q * s / math.sqrt(m) for q, s, m in zip(share, sigma, n) if q > 0 and math.isfinite(s) and m > 0)
    want_var = sum(q * s * s / m for q, s, m in zip(share, sigma, n) if q > 0 and math.isfinite(s) and m > 0)
    arrays = (np.array(share), np.array(sigma), np.array(n, float))
    assert se_proxy(*arrays) == pytest.approx(want_se, rel=1e-9, abs=1e-12)
    assert variance_proxy(arrays[0], arrays[1] ** 2, arrays[2]) == pytest.approx(want_var, rel=1e-9, abs=1e-12)


def test_se_report_by_hand():
    share = np.array([0.5, 0.5])
    sigma = np.array([1.0, 3.0])
    n = np.array([2.0, 6.0])
    report = se_report(share, sigma, n, n_bar=4.0, n_min=2.0, n_max=12.0)
    uniform = 0.5 * 1 / 2 + 0.5 * 3 / 2
    actual = 0.5 * 1 / math.sqrt(2) + 0.5 * 3 / math.sqrt(6)
    # square-root law: n ~ sigma, budget 4: (2, 6) -- here the actual plan is the optimum
    assert report["se_uniform"] == pytest.approx(uniform)
    assert report["se_actual"] == pytest.approx(actual)
    assert report["se_sqrt"] == pytest.approx(actual)
    assert report["se_reduction_pct"] == pytest.approx(100 * (1 - actual / uniform))
    assert report["se_sqrt_reduction_pct"] == pytest.approx(100 * (1 - actual / uniform))
    uniform_report = se_report(share, sigma, np.full(2, 4.0), 4.0, 2.0, 12.0)
    assert uniform_report["se_actual"] == pytest.approx(uniform) and uniform_report["se_reduction_pct"] == 0.0


def test_se_report_degenerate_inputs():
    zero = se_report(np.array([0.5, 0.5]), np.zeros(2), np.array([2.0, 6.0]), 4.0, 2.0, 12.0)
    assert zero["se_uniform"] == 0.0 and zero["se_reduction_pct"] == 0.0
    empty = se_report(np.zeros(2), np.ones(2), np.full(2, 4.0), 4.0, 2.0, 12.0)
    assert math.isnan(empty["se_sqrt"])


@PROPERTY
@given(st.data())
def test_se_report_sqrt_optimum_beats_uniform_on_variance_proxy(data):
    num_bins = data.draw(st.integers(1, 10))
    share = np.array(data.draw(st.lists(st.floats(0.0, 1.0), min_size=num_bins, max_size=num_bins)))
    sigma = np.array(data.draw(st.lists(st.floats(0.01, 3.0), min_size=num_bins, max_size=num_bins)))
    assume(share.sum() > 1e-3)
    share = share / share.sum()
    n_bar, n_min, n_max = 4.0, 2.0, 12.0
    optimum = sqrt_allocation(sigma**2, share, n_bar, n_min, n_max)
    assert variance_proxy(share, sigma**2, optimum) <= variance_proxy(share, sigma**2, np.full(num_bins, n_bar)) + 1e-12
    report = se_report(share, sigma, np.full(num_bins, n_bar), n_bar, n_min, n_max)
    assert report["se_sqrt"] == pytest.approx(se_proxy(share, sigma, optimum), rel=1e-12)
    assert report["se_uniform"] == pytest.approx(report["se_actual"], rel=1e-12)


# ----------------------------------------------------------------------------- support, worst group, tails

def test_effective_support_point_mass_and_uniform():
    assert effective_support(np.array([0.0, 0.0, 5.0, 0.0])) == pytest.approx(1.0)
    for size in (1, 2, 7, 10):
        assert effective_support(np.full(size, 0.3)) == pytest.approx(size)
    with pytest.raises(ValueError, match="weights_G"):  # all-zero weights are an error, not uniform
        effective_support(np.zeros(5))


@PROPERTY
@given(st.lists(st.floats(0.0, 10.0), min_size=1, max_size=12))
def test_effective_support_is_exp_entropy(weights):
    assume(sum(weights) > 1e-6)
    total = sum(weights)
    probabilities = [w / total for w in weights]
    entropy = -sum(p * math.log(p) for p in probabilities if p > 0)
    got = effective_support(np.array(weights))
    assert got == pytest.approx(math.exp(entropy), rel=1e-9)
    assert 1.0 - 1e-9 <= got <= len(weights) + 1e-9


def test_worst_group_ignores_nan():
    assert worst_group(np.array([0.4, np.nan, 0.2, 0.9])) == 0.2
    assert math.isnan(worst_group(np.array([np.nan, np.nan])))
    assert math.isnan(worst_group(np.array([])))


def test_tail_average_by_hand():
    values = np.arange(10, dtype=float)[:, None] * np.array([[1.0, 2.0]])
    values[9, 1] = np.nan  # NaN steps are skipped
    got = tail_average(values, 0.6)  # steps 6..9
    np.testing.assert_allclose(got, [7.5, 2 * 7.0])
    np.testing.assert_allclose(tail_average(values[:, :1], 0.0), [4.5])


@PROPERTY
@given(st.integers(1, 40), st.floats(0.0, 0.99))
def test_tail_average_against_loop(num_steps, quantile):
    rng = np.random.default_rng(num_steps)
    values = rng.normal(size=(num_steps, 3))
    start = math.floor(quantile * num_steps)
    want = [sum(values[t, g] for t in range(start, num_steps)) / (num_steps - start) for g in range(3)]
    np.testing.assert_allclose(tail_average(values, quantile), want, rtol=1e-9)


@pytest.mark.parametrize("num_steps, want", [
    (1, {"start": 0, "early-mid": 0, "late-mid": 0, "end": 0}),
    (0, {"start": 0, "early-mid": 0, "late-mid": 0, "end": 0}),
    (10, {"start": 0, "early-mid": 3, "late-mid": 6, "end": 9}),
    (1000, {"start": 0, "early-mid": 333, "late-mid": 666, "end": 999}),
])
def test_snapshot_steps(num_steps, want):
    assert snapshot_steps(num_steps) == want


UNIT = st.one_of(st.just(0.0), st.floats(1e-6, 1.0))  # no subnormals: their squares underflow either way


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.tuples(UNIT, UNIT, st.floats(2.0, 12.0)), min_size=1, max_size=12), n_bar=st.floats(2.0, 12.0))
def test_the_fast_path_of_se_terms_equals_the_array_sums(rows, n_bar):
    """Given lists of floats (the step record's per-step call), se_terms sums in plain Python; equal to
    the numpy sums over arrays (se_report's path) to rounding."""
    from gdro_lab.functional.diagnostics import se_terms

    share, sigma, n_G = (list(column) for column in zip(*rows))
    assume(sum(share) > 0)
    expected = se_terms(np.array(share), np.array(sigma), np.array(n_G), n_bar, 2, 12)
    got = se_terms(share, sigma, n_G, n_bar, 2, 12)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-6), key  # abs: percentages near 0 cancel


@settings(max_examples=300, deadline=None)
@given(weights=st.lists(st.floats(0.0, 1e3), min_size=1, max_size=16))
def test_the_fast_path_of_support_of_distribution_equals_the_array_form(weights):
    from gdro_lab.functional.diagnostics import support_of_distribution

    assume(sum(weights) > 0)
    p = np.array(weights) / sum(weights)
    p = p[p > 0]
    plain = float(np.exp(-np.sum(p * np.log(p))))  # exp(entropy)
    assert support_of_distribution(weights) == pytest.approx(plain, rel=1e-12)
    assert support_of_distribution(np.array(weights)) == pytest.approx(plain, rel=1e-12)


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.tuples(UNIT, UNIT), min_size=1, max_size=12))
def test_the_fast_path_of_lead_lag_gap_equals_the_array_statement(rows):
    """Lists of floats (the step record's per-step call) are summed in plain Python; equal to Eq. 32 on arrays."""
    weights, share = (list(column) for column in zip(*rows))
    assume(sum(weights) > 0 and sum(share) > 0)
    index = np.arange(len(weights))
    plain_weight = float(index @ (np.array(weights) / np.sum(weights)))
    plain_data = float(index @ (np.array(share) / np.sum(share)))
    for got in (lead_lag_gap(weights, share), lead_lag_gap(np.array(weights), np.array(share))):
        assert got == pytest.approx((plain_weight - plain_data, plain_weight, plain_data), rel=1e-12, abs=1e-12)
    with pytest.raises(ConfigError, match="must match weights_G"):
        lead_lag_gap(weights, share + [0.5])


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.tuples(UNIT, st.one_of(UNIT, st.just(float("nan"))), st.floats(2.0, 12.0)), min_size=1,
                     max_size=12), n_bar=st.floats(2.0, 12.0))
def test_se_report_on_lists_equals_se_report_on_arrays(rows, n_bar):
    """se_report's fast path (plainly valid lists: every sigma known) gives the array path's values to rounding;
    lists with an unknown sigma take the array path itself."""
    share, sigma, n_G = (list(column) for column in zip(*rows))
    assume(sum(share) > 0)
    expected = se_report(np.array(share), np.array(sigma), np.array(n_G), n_bar, 2, 12)
    got = se_report(share, sigma, n_G, n_bar, 2, 12)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-6, nan_ok=True), key


@settings(max_examples=200, deadline=None)
@given(weights=st.lists(st.one_of(st.floats(0.0, 1e3), st.just(-1.0), st.just(float("inf"))), min_size=1, max_size=12))
def test_normalized_fast_path_equals_the_checked_path(weights):
    """A float64 array is checked by its sum and minimum alone: the same result as the list (checked) path, and
    the same one-line error for a negative, infinite or zero-sum weight."""
    from gdro_lab.functional.diagnostics import normalized

    try:
        expected = normalized(weights)
    except ConfigError as error:
        with pytest.raises(ConfigError, match=str(error).split(":")[0]):
            normalized(np.array(weights))
        return
    assert normalized(np.array(weights)).tobytes() == expected.tobytes()


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(st.floats(0.0, 5.0), st.sampled_from([0.0, 2.0, 4.0, 8.0])), max_size=16))
def test_multiplier_moments_are_the_plain_statement(rows):
    from gdro_lab.functional.diagnostics import multiplier_moments

    m = np.array([row[0] for row in rows])
    a = np.array([row[1] for row in rows])
    mean, second = multiplier_moments(m, a)
    if not rows:
        assert math.isnan(mean) and math.isnan(second)
        return
    assert mean == pytest.approx(np.mean(m), rel=1e-12)
    if a.sum() > 0:
        assert second == pytest.approx(np.sum(a * m**2) / np.sum(a), rel=1e-12)
    else:
        assert math.isnan(second)
    assert multiplier_moments(m)[1] == pytest.approx(np.mean(m**2), rel=1e-12)
