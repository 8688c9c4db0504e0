"""Tests of gdro_lab.functional.grpo (ragged GRPO advantages) against naive per-group Python loops."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gdro_lab import ConfigError
from gdro_lab.functional.grpo import group_index, group_mean, group_sum, group_variance, grpo_advantages

PROPERTY = settings(max_examples=150, deadline=None)


# ----------------------------------------------------------------------------- references

def split(values, counts):
    out, start = [], 0
    for n in counts:
        out.append([float(v) for v in values[start:start + n]])
        start += n
    return out


def advantages_naive(rewards, counts, std="population", eps=1e-6, clip=None, normalize_std=True):
    """Eq. 3 per group: (r - mean) / (std + eps); all-equal groups get exactly 0."""
    out, zero = [], 0
    for group in split(rewards, counts):
        n = len(group)
        mean = math.fsum(group) / n
        if len(set(group)) == 1:
            zero += 1
            out.extend([0.0] * n)
            continue
        ddof = 1 if std == "bessel" else 0
        sd = math.sqrt(math.fsum((r - mean) ** 2 for r in group) / (n - ddof))
        for r in group:
            a = (r - mean) / (sd + eps) if normalize_std else r - mean
            if clip is not None:
                a = min(max(a, -clip), clip)
            out.append(a)
    return np.array(out), zero / len(counts)


@st.composite
def ragged(draw, min_count=1, values=st.sampled_from([-1.0, 1.0]), max_prompts=12):
    counts = draw(st.lists(st.integers(min_count, 9), min_size=1, max_size=max_prompts))
    rewards = draw(st.lists(values, min_size=sum(counts), max_size=sum(counts)))
    return np.array(rewards, float), np.array(counts)


# ----------------------------------------------------------------------------- group statistics

@PROPERTY
@given(ragged(values=st.floats(-10, 10)))
def test_group_sum_mean_variance_against_loops(data):
    rewards, counts = data
    groups = split(rewards, counts)
    np.testing.assert_allclose(group_sum(rewards, counts), [math.fsum(g) for g in groups], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(group_mean(rewards, counts), [math.fsum(g) / len(g) for g in groups],
                               rtol=1e-12, atol=1e-12)
    for ddof in (0, 1):
        want = [np.var(g, ddof=ddof) if len(g) > ddof else np.nan for g in groups]
        np.testing.assert_allclose(group_variance(rewards, counts, ddof=ddof), want, rtol=1e-9, atol=1e-12)
    assert group_index(counts).tolist() == [i for i, n in enumerate(counts) for _ in range(n)]


def test_group_variance_nan_where_too_few():
    got = group_variance(np.array([1.0, 2.0, 4.0]), np.array([1, 2]), ddof=1)
    assert np.isnan(got[0]) and got[1] == pytest.approx(2.0)  # (2, 4): mean 3, ss 2, / (2 - 1)


@pytest.mark.parametrize("fn", [group_sum, group_mean, group_variance])
def test_group_functions_reject_bad_layout(fn):
    with pytest.raises(ConfigError) as info:
        fn(np.ones(5), np.array([2, 2]))
    assert "\n" not in str(info.value)
    with pytest.raises(ConfigError):
        fn(np.ones(2), np.array([2, 0]))


# ----------------------------------------------------------------------------- advantages

# eps = 0 divides 0 by 0 on zero-variance groups before they are set to 0 (a harmless warning)
@pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning")
@PROPERTY
@given(ragged(), st.sampled_from(["population", "bessel"]), st.sampled_from([1e-6, 0.0, 0.1]),
       st.sampled_from([None, 0.5, 1.0, 5.0]), st.booleans())
def test_grpo_advantages_binary_rewards_against_loop(data, std, eps, clip, normalize_std):
    rewards, counts = data
    if std == "bessel":
        counts = np.maximum(counts, 2)
        rewards = np.resize(rewards, int(counts.sum()))
    got, metrics = grpo_advantages(rewards, counts, std=std, eps=eps, clip=clip, normalize_std=normalize_std)
    want, zero_frac = advantages_naive(rewards, counts, std, eps, clip, normalize_std)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert metrics["zero_variance_frac"] == pytest.approx(zero_frac)
    assert metrics["adv_abs_mean"] == pytest.approx(np.abs(want).mean())


@PROPERTY
@given(ragged(values=st.integers(-4, 4).map(lambda x: x / 2.0)), st.sampled_from(["population", "bessel"]))
def test_grpo_advantages_dyadic_rewards_against_loop(data, std):
    # multiples of 1/2: group means of up to 9 rollouts are still exact
    rewards, counts = data
    if std == "bessel":
        counts = np.maximum(counts, 2)
        rewards = np.resize(rewards, int(counts.sum()))
    got, metrics = grpo_advantages(rewards, counts, std=std)
    want, zero_frac = advantages_naive(rewards, counts, std)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    assert metrics["zero_variance_frac"] == pytest.approx(zero_frac)


@pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning")
def test_grpo_advantages_by_hand_population_and_bessel():
    rewards = np.array([1.0, -1.0, -1.0, -1.0, 1.0, 1.0, 1.0])
    counts = np.array([4, 3])
    got, metrics = grpo_advantages(rewards, counts, eps=0.0)
    # group 0: mean -0.5, population std sqrt(3)/2; group 1: all equal -> 0
    s = math.sqrt(3) / 2
    np.testing.assert_allclose(got, [1.5 / s, -0.5 / s, -0.5 / s, -0.5 / s, 0, 0, 0])
    assert metrics["zero_variance_frac"] == 0.5
    got_b, _ = grpo_advantages(rewards, counts, std="bessel", eps=0.0)
    sb = math.sqrt(1.0)  # Bessel: sum of squares 3 / (4 - 1)
    np.testing.assert_allclose(got_b[:4], [1.5 / sb, -0.5 / sb, -0.5 / sb, -0.5 / sb])
    clipped, _ = grpo_advantages(rewards, counts, eps=0.0, clip=1.0)
    assert clipped.max() == 1.0 and clipped.min() == pytest.approx(-0.5 / s)


def test_grpo_advantages_zero_mean_within_groups():
    rng = np.random.default_rng(0)
    counts = rng.integers(2, 13, 50)
    rewards = rng.choice([-1.0, 1.0], int(counts.sum()))
    advantages, _ = grpo_advantages(rewards, counts)
    np.testing.assert_allclose(group_sum(advantages, counts), 0.0, atol=1e-9)


def test_grpo_advantages_errors():
    with pytest.raises(ConfigError) as info:
        grpo_advantages(np.ones(5), np.array([2, 2]))
    assert "\n" not in str(info.value) and "5" in str(info.value)
    # a group of one no longer raises with the Bessel std: singleton="zero" (default) gives A = 0
    advantages, _ = grpo_advantages(np.array([1.0, -1.0, 1.0]), np.array([2, 1]), std="bessel")
    assert advantages[2] == 0.0
    with pytest.raises(ConfigError):
        grpo_advantages(np.ones(2), np.array([2]), std="sample")
    with pytest.raises(ConfigError):
        grpo_advantages(np.ones(2), np.array([[2]]))


def test_grpo_advantages_single_rollout_population_is_zero():
    got, metrics = grpo_advantages(np.array([1.0, -1.0, 1.0]), np.array([1, 2]))
    assert got[0] == 0.0 and metrics["zero_variance_frac"] == 0.5


@pytest.mark.parametrize("normalize_std", [True, False])
def test_grpo_advantages_equal_float_rewards_are_zero_variance(normalize_std):
    rewards = np.array([0.1, 0.1, 0.1, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7])
    got, metrics = grpo_advantages(rewards, np.array([3, 7]), normalize_std=normalize_std)
    assert metrics["zero_variance_frac"] == 1.0
    assert np.all(got == 0.0)


# ----------------------------------------------------------------------------- verl parity (singleton="verl")

def _verl_rederived(rewards, counts, eps, normalize):
    """verl 0.9.1 compute_grpo_outcome_advantage semantics, re-derived with torch per group:
    singleton groups mean 0 / std 1; else torch.mean and torch.std (Bessel); eps outside the root."""
    torch = pytest.importorskip("torch")
    out, start = [], 0
    for n in counts:
        group = torch.tensor(rewards[start: start + n], dtype=torch.float64)
        mean, std = (torch.tensor(0.0, dtype=torch.float64), torch.tensor(1.0, dtype=torch.float64)) if n == 1 \
            else (torch.mean(group), torch.std(group))
        out.append(((group - mean) / (std + eps) if normalize else group - mean).numpy())
        start += n
    return np.concatenate(out)


def test_verl_singleton_by_hand():
    eps = 1e-6
    rewards = np.array([1.0, 0.0, 1.0, 1.0, -1.0])
    counts = np.array([1, 3, 1])
    adv, _ = grpo_advantages(rewards, counts, std="bessel", singleton="verl", eps=eps)
    s = math.sqrt(1 / 3)  # Bessel std of (0, 1, 1)
    np.testing.assert_allclose(adv, [1 / (1 + eps), (0 - 2 / 3) / (s + eps), (1 / 3) / (s + eps),
                                     (1 / 3) / (s + eps), -1 / (1 + eps)], rtol=1e-15)
    raw, _ = grpo_advantages(rewards, counts, std="bessel", singleton="verl", normalize_std=False)
    np.testing.assert_allclose(raw, [1.0, -2 / 3, 1 / 3, 1 / 3, -1.0], rtol=1e-15)


def test_zero_singleton_is_the_default_and_accepts_bessel():
    adv, metrics = grpo_advantages(np.array([1.0, 0.0, 1.0]), np.array([1, 2]), std="bessel")
    assert adv[0] == 0.0
    np.testing.assert_allclose(adv[1:], [-0.5 / (math.sqrt(0.5) + 1e-6), 0.5 / (math.sqrt(0.5) + 1e-6)])


@pytest.mark.parametrize("normalize", [True, False])
def test_verl_mode_equals_torch_rederivation(normalize):
    rng = np.random.default_rng(11)
    for _ in range(30):
        counts = rng.integers(1, 7, size=rng.integers(1, 9))
        rewards = rng.choice([-1.0, 0.0, 0.5, 1.0], size=counts.sum()) if rng.random() < 0.5 \
            else rng.normal(size=counts.sum())
        adv, _ = grpo_advantages(rewards, counts, std="bessel", singleton="verl", normalize_std=normalize)
        np.testing.assert_allclose(adv, _verl_rederived(rewards, counts, 1e-6, normalize), rtol=1e-12, atol=1e-12)
