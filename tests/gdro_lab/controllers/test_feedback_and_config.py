"""Tests of StepFeedback validation, config dataclass validation and the registry's errors."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from gdro_lab import (REGISTRY, AllocatorConfig, ClassifierConfig, ConfigError, StepFeedback, WeighterConfig, build,
                      make_config)


def one_line(info: pytest.ExceptionInfo) -> str:
    message = str(info.value)
    assert "\n" not in message and message.strip()
    return message


# ----------------------------------------------------------------------------- StepFeedback

def valid_feedback_kwargs() -> dict:
    counts = np.array([2, 3])
    return {"prompt_ids": ["p0", "p1"], "bins_P": np.array([0, -1]), "counts_P": counts,
            "rewards_R": np.array([1.0, -1.0, 1.0, 1.0, -1.0]),
            "successes_R": np.array([True, False, True, True, False])}


def test_feedback_accepts_consistent_shapes():
    feedback = StepFeedback(**valid_feedback_kwargs(), losses_R=np.zeros(5))
    assert feedback.num_prompts == 2
    assert feedback.successes_P().tolist() == [1, 2]


@pytest.mark.parametrize("field, value", [
    ("bins_P", np.array([0, 1, 2])),
    ("bins_P", np.array([[0, 1]])),
    ("counts_P", np.array([5])),
    ("counts_P", np.array([2, 3, 0])),
    ("counts_P", np.array([5, 0])),                 # a prompt without rollouts
    ("rewards_R", np.ones(4)),
    ("rewards_R", np.ones((5, 1))),
    ("successes_R", np.ones(6, bool)),
    ("losses_R", np.zeros(3)),
    ("prompt_ids", ["p0"]),
])
def test_feedback_rejects_mismatched_shapes(field, value):
    kwargs = valid_feedback_kwargs()
    kwargs[field] = value
    with pytest.raises(ConfigError) as info:
        StepFeedback(**kwargs)
    one_line(info)


def test_feedback_shape_error_names_the_field():
    kwargs = valid_feedback_kwargs()
    kwargs["successes_R"] = np.ones(4, bool)
    with pytest.raises(ConfigError) as info:
        StepFeedback(**kwargs)
    assert "successes_R" in one_line(info)


# ----------------------------------------------------------------------------- configs

BAD_VALUES = {
    ClassifierConfig: [
        ("edges", ()), ("edges", (0.5, 0.3)), ("edges", (0.2, 0.2)), ("edges", (0.0, 0.5)), ("edges", (0.5, 1.0)),
        ("edges", (-0.1,)), ("edges", (math.nan,)),
        ("window", 0), ("window", -3), ("window", 2.5), ("window", "50"),
        ("k", 0), ("k", 1.0), ("k", None),
        ("hysteresis", -0.01), ("hysteresis", 0.5), ("hysteresis", math.nan), ("hysteresis", math.inf),
        ("hysteresis", "0.1"), ("hysteresis", True), ("exclude_extremes", "yes"), ("exclude_extremes", 1),
        ("prior_a", 0.0), ("prior_a", -1.0), ("prior_a", math.inf),
        ("prior_b", 0.0), ("prior_b", math.nan),
        ("credible", 0.0), ("credible", 1.0), ("credible", 1.5),
    ],
    WeighterConfig: [
        ("num_bins", 0), ("num_bins", 2.0),
        ("eta", -0.1), ("eta", math.inf),
        ("gamma", -0.01), ("gamma", 1.01), ("gamma", math.nan),
        ("ema_beta", 0.0), ("ema_beta", 1.1),
        ("share_floor", 0.0), ("share_floor", 1.5),
        ("clip", 0.0), ("clip", -1.0),
        ("max_weight", 0.99), ("max_weight", math.inf),
        ("weight_mode", "mean"), ("weight_mode", ""),
        ("signal", "loss"),
    ],
    AllocatorConfig: [
        ("num_bins", 0), ("num_bins", -1),
        ("n_min", 1), ("n_min", 2.0),
        ("n_max", 1), ("n_max", 12.5),
        ("n_bar", 1), ("n_bar", 13), ("n_bar", 4.0),
        ("eta", -1.0),
        ("gamma", 1.0), ("gamma", -0.5),
        ("dual_lr", -0.05), ("dual_lr", math.nan),
        ("mu_init", -1.0),
        ("feedback", "partial"),
        ("planner", "greedy"),
        ("variance_ema", 0.0), ("variance_ema", 1.01),
        ("variance_floor", 0.0),
        ("score_decay", 1.0), ("score_decay", -0.1),
    ],
}
CASES = [(cls, field, value) for cls, bad in BAD_VALUES.items() for field, value in bad]


@pytest.mark.parametrize("config_class", list(BAD_VALUES))
def test_config_defaults_are_valid_and_frozen(config_class):
    config = config_class()
    name = dataclasses.fields(config)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(config, name, getattr(config, name))


@pytest.mark.parametrize("config_class, field, value", CASES,
                         ids=[f"{c.__name__}.{f}={v!r}" for c, f, v in CASES])
def test_config_rejects_out_of_range(config_class, field, value):
    with pytest.raises(ConfigError) as info:
        config_class(**{field: value})
    message = one_line(info)
    assert f"{config_class.__name__}.{field}=" in message


def test_every_numeric_config_field_has_a_bad_value_case():
    for config_class, bad in BAD_VALUES.items():
        covered = {field for field, _ in bad}
        fields = {f.name for f in dataclasses.fields(config_class)} - {"share_normalize", "oracle"}
        assert fields == covered, config_class.__name__


@pytest.mark.parametrize("config_class, values", [
    (ClassifierConfig, {"edges": [0.3, 0.6], "window": 1, "k": 4, "hysteresis": 0.0, "credible": 0.5}),
    (WeighterConfig, {"num_bins": 1, "eta": 0.0, "gamma": 1.0, "ema_beta": 1.0, "share_floor": 1.0,
                      "max_weight": 1.0, "weight_mode": "mean1", "signal": "reward_std"}),
    (AllocatorConfig, {"n_min": 2, "n_max": 2, "n_bar": 2, "gamma": 0.0, "mu_init": 0.0, "feedback": "bandit",
                       "planner": "dp_bin", "variance_ema": 1.0}),
])
def test_config_accepts_boundary_values(config_class, values):
    config = config_class(**values)
    for name, value in values.items():
        assert getattr(config, name) == (tuple(value) if isinstance(value, list) else value)


def test_classifier_edges_normalised_to_float_tuple():
    config = ClassifierConfig(edges=[0.25, 0.75])
    assert config.edges == (0.25, 0.75) and config.num_bins == 3


@pytest.mark.parametrize("config_class, field", [
    (ClassifierConfig, "window"), (ClassifierConfig, "k"), (WeighterConfig, "num_bins"),
    (AllocatorConfig, "num_bins"),
])
def test_integer_fields_reject_booleans(config_class, field):
    with pytest.raises(ConfigError):
        config_class(**{field: True})


# ----------------------------------------------------------------------------- registry

@pytest.mark.parametrize("config_class", [ClassifierConfig, WeighterConfig, AllocatorConfig])
def test_make_config_rejects_unknown_keys_naming_them(config_class):
    with pytest.raises(ConfigError) as info:
        make_config(config_class, {"bogus_key": 1, "another_one": 2})
    message = one_line(info)
    assert "bogus_key" in message and "another_one" in message and config_class.__name__ in message


def test_make_config_builds_and_converts_edges():
    config = make_config(ClassifierConfig, {"edges": [0.2, 0.8], "window": 5})
    assert config == ClassifierConfig(edges=(0.2, 0.8), window=5)
    assert make_config(AllocatorConfig, None) == AllocatorConfig()
    with pytest.raises(ConfigError) as info:  # known key, bad value: the dataclass check fires
        make_config(AllocatorConfig, {"n_bar": 99})
    assert "AllocatorConfig.n_bar=" in one_line(info)


def test_build_rejects_unknown_family_and_name():
    with pytest.raises(ConfigError) as info:
        build("optimizer", "adam")
    assert "optimizer" in one_line(info)
    with pytest.raises(ConfigError) as info:
        build("allocator", "magic")
    message = one_line(info)
    assert "magic" in message and all(name in message for name in REGISTRY["allocator"])


@pytest.mark.parametrize("family, name", [(f, n) for f, names in REGISTRY.items() for n in names])
def test_build_every_registered_controller_from_mapping(family, name):
    controller = build(family, name, {}, seed=3)
    assert isinstance(controller, REGISTRY[family][name])
    assert isinstance(controller.config, REGISTRY[family][name].config_class)
    with pytest.raises(ConfigError):
        build(family, name, {"not_a_field": 1})


@pytest.mark.parametrize("edges", [("a", 0.5), 0.5])
def test_classifier_edges_of_wrong_type_raise_config_error(edges):
    with pytest.raises(ConfigError) as info:
        ClassifierConfig(edges=edges)
    assert "ClassifierConfig.edges=" in one_line(info)


# ----------------------------------------------------------------------------- shared per-step statistics

def _ragged(seed: int, singletons: bool):
    rng = np.random.default_rng(seed)
    counts = rng.integers(1 if singletons else 2, 9, size=40)
    rewards = np.round(rng.normal(size=counts.sum()), 1)  # ties and constant groups happen
    rewards[: counts[0]] = 0.3  # one constant group whose mean is not exact
    bins = rng.integers(-1, 5, size=40)
    return StepFeedback([str(i) for i in range(40)], bins, counts, rewards, rewards > 0), bins, counts, rewards


@pytest.mark.parametrize("singletons", [False, True])
def test_cached_statistics_equal_the_functions_they_replace(singletons):
    """Each cached per-step quantity equals the grpo / diagnostics function computed from scratch, bit for bit."""
    from gdro_lab.functional import diagnostics as diag
    from gdro_lab.functional.grpo import group_is_constant, group_mean, group_sum, group_variance, grpo_advantages

    feedback, bins, counts, rewards = _ragged(3, singletons)
    success = rewards > 0
    np.testing.assert_array_equal(feedback.successes_P(), group_sum(success.astype(float), counts).astype(int))
    np.testing.assert_array_equal(feedback.success_rate_P, group_mean(success.astype(float), counts))
    np.testing.assert_array_equal(feedback.reward_mean_P, group_mean(rewards, counts))
    for ddof in (0, 1):
        np.testing.assert_array_equal(feedback.reward_var_P(ddof), group_variance(rewards, counts, ddof=ddof))
    np.testing.assert_array_equal(feedback.constant_P, group_is_constant(rewards, counts))
    np.testing.assert_array_equal(feedback.bin_count(5), diag.bin_counts(bins, 5))
    np.testing.assert_array_equal(feedback.bin_share(5), diag.bin_share(bins, 5))
    values = np.random.default_rng(0).normal(size=(3, 40))
    for row, means in zip(values, feedback.bin_means(values, 5)):
        np.testing.assert_array_equal(means, diag.bin_mean(row, bins, 5))
        np.testing.assert_array_equal(feedback.bin_mean(row, 5), diag.bin_mean(row, bins, 5))
    for std in ("population", "bessel"):
        for singleton in ("zero", "verl"):
            for clip, normalize in ((None, True), (1.0, True), (None, False)):
                ours, our_metrics = feedback.advantages(std=std, clip=clip, singleton=singleton, normalize_std=normalize)
                theirs, their_metrics = grpo_advantages(rewards, counts, std=std, clip=clip, singleton=singleton,
                                                        normalize_std=normalize)
                np.testing.assert_array_equal(ours, theirs)
                assert our_metrics == their_metrics
    assert feedback.num_assigned == int(np.sum(bins >= 0)) and feedback.total == counts.sum()
    before = feedback.successes_P()
    before[:] = -5  # the public accessor hands out a copy
    assert (feedback.successes_P() >= 0).all()


def test_feedback_keeps_its_own_bins_and_leaves_the_callers_arrays_writable():
    bins = np.array([0, 1])
    feedback = StepFeedback(["a", "b"], bins, np.array([2, 2]), np.ones(4), np.ones(4, bool))
    bins[0] = 1  # still the caller's to change, and the feedback's statistics do not move
    assert feedback.bins_P.tolist() == [0, 1] and feedback.bin_count(2).tolist() == [1, 1]
