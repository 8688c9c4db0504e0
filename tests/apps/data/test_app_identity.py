"""Run identity: names from the config keys that differ (never a hash), trainer and simulator
layouts, user-chosen keys, and colours (a hue per method, a lightness per variant)."""

from __future__ import annotations

import colorsys
import importlib.util
import re
from typing import Any

import pytest
from gdro_app_synthetic import trainer_config

from apps.data import identity
from apps.data.colours import METHOD_COLOURS, group_colours, method_hues, run_colours

HASH = re.compile(r"\b[0-9a-f]{6}\b")
DEFAULT_GRID = (0.125, 0.25, 0.5, 1.0, 2.0)


def _simulator_configs() -> dict[str, dict[str, Any]]:
    """config.json of the simulator's default study layout: 3 methods x 5 lr scales x 2 seeds, and a
    step-matched GRPO (GRPO at the lr that matches Prompt-GDRO's mean step), written by the
    simulator's own payload builder."""
    from simulators.loop import SimConfig, _config_payload

    configs = {}
    for method in ("grpo", "prompt_gdro", "rollout_gdro"):
        for lr_scale in DEFAULT_GRID:
            for seed in range(2):
                config = SimConfig(method=method, seed=seed, lr_scale=lr_scale, snapshot_every=0 if seed == 0 else -1)
                configs[f"{method}/lr{lr_scale:g}/seed{seed}"] = _config_payload(config)
    for seed in range(2):
        configs[f"grpo_matched_prompt_gdro/seed{seed}"] = _config_payload(SimConfig(method="grpo", seed=seed,
                                                                                    lr_scale=1.6298))
    return configs


def _hue(colour: str) -> float:
    return colorsys.rgb_to_hls(*(int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)))[0]


def _lightness(colour: str) -> float:
    return colorsys.rgb_to_hls(*(int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)))[1]


@pytest.mark.skipif(importlib.util.find_spec("simulators") is None, reason="the simulator is not installed")
def test_default_study_is_named_by_method_and_lr_scale_not_by_hash() -> None:
    grouping = identity.group_runs(_simulator_configs())
    assert grouping.keys == ("method", "lr_scale") and grouping.automatic
    labels = [group.label for group in grouping.groups]
    assert len(labels) == 16 == len(set(labels)), "15 grid cells and the step-matched GRPO"
    expected = {f"{method} lr×{lr:g}" for method in ("grpo", "prompt_gdro", "rollout_gdro") for lr in DEFAULT_GRID}
    assert expected | {"grpo lr×1.63"} == set(labels)
    assert not any(HASH.search(label) for label in labels)
    assert all(group.members and len(group.members) == 2 for group in grouping.groups), "two seeds per group"
    assert grouping.display("grpo_matched_prompt_gdro/seed1") == "grpo lr×1.63 · seed 1"
    assert grouping.group_of["grpo/lr0.125/seed0"] == grouping.group_of["grpo/lr0.125/seed1"] == "grpo lr×0.125"


@pytest.mark.skipif(importlib.util.find_spec("simulators") is None, reason="the simulator is not installed")
def test_colours_hue_per_method_lightness_per_variant() -> None:
    grouping = identity.group_runs(_simulator_configs())
    colours = group_colours(grouping)
    for method in ("grpo", "prompt_gdro", "rollout_gdro"):
        groups = [group for group in grouping.groups if group.method == method]
        shades = [colours[group.label] for group in groups]
        assert len(set(shades)) == len(shades), f"{method}: every variant its own colour"
        if method != "grpo":  # GRPO is grey: no hue to compare
            assert max(_hue(c) for c in shades) - min(_hue(c) for c in shades) < 0.02, f"{method}: one hue"
        ordered = sorted(groups, key=lambda group: float(group.values[1]))
        lightness = [_lightness(colours[group.label]) for group in ordered]
        assert lightness == sorted(lightness), "darker for smaller learning rates"
    assert colours["grpo/lr1/seed0"] == colours["grpo lr×1"], "a run has its group's colour"
    assert colours["prompt_gdro lr×1"] != colours["rollout_gdro lr×1"]


def test_a_new_method_gets_a_stable_colour_of_its_own() -> None:
    first = method_hues(["grpo", "vip", "greso"])
    again = method_hues(["greso", "vip", "grpo", "prompt_gdro"])
    assert first["vip"] == again["vip"] and first["greso"] == again["greso"], "independent of order and company"
    assert first["grpo"] == METHOD_COLOURS["grpo"]
    assert len(set(first.values())) == 3
    names = [f"method_{index}" for index in range(12)]
    assert len(set(method_hues(names).values())) == 12, "distinct slots while the palette lasts"


def test_trainer_runs_show_method_and_seed_and_group_by_them() -> None:
    configs = {f"{method}-tiny-s{seed}": trainer_config(method, seed, 1.0, 6, 20, 8)
               for method in ("grpo", "prompt_gdro") for seed in range(3)}
    grouping = identity.group_runs(configs)
    assert grouping.keys == ("method",), "run_name, out and seeds are bookkeeping"
    assert {group.label: len(group.members) for group in grouping.groups} == {"grpo": 3, "prompt_gdro": 3}
    assert grouping.display("prompt_gdro-tiny-s2") == "prompt_gdro · seed 2"
    assert identity.method_of(configs["grpo-tiny-s1"]) == "grpo" and identity.seed_of(configs["grpo-tiny-s1"]) == 1


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the trainer (torch) is not installed")
def test_synthetic_trainer_config_has_the_trainers_layout() -> None:
    """The test writer's trainer config keeps the sections and key names of ``gdro train``'s own."""
    from real_runs.config import TrainConfig, config_to_dict

    real = config_to_dict(TrainConfig())
    ours = trainer_config("grpo", 0, 1.0, 10, 10, 8)
    assert set(ours) == set(real)
    for section, values in ours.items():
        assert set(values) <= set(real[section]), section
    assert identity.method_of(real) == "grpo" and identity.seed_of(real) == 0


def test_user_chosen_keys_group_and_name_the_runs() -> None:
    configs = {f"{method}/lr{lr}/seed{seed}": {"method": method, "seed": seed, "lr_scale": lr, "world": {"transfer": 0.5}}
               for method in ("grpo", "prompt_gdro") for lr in (0.5, 1.0) for seed in range(2)}
    by_lr = identity.group_runs(configs, ["lr_scale"])
    assert not by_lr.automatic and [group.label for group in by_lr.groups] == ["lr×0.5", "lr×1"]
    assert all(len(group.members) == 4 and group.method == "" for group in by_lr.groups), "two methods per group"
    by_method = identity.group_runs(configs, ["method"])
    assert [group.label for group in by_method.groups] == ["grpo", "prompt_gdro"]
    nested = identity.group_runs(configs, ["method", "world.transfer"])
    assert nested.groups[0].label == "grpo transfer=0.5"


def test_numbers_get_the_digits_that_keep_them_apart() -> None:
    texts = identity.format_values([1.5811, 1.5849, 0.125, 2])
    assert texts == {1.5811: "1.581", 1.5849: "1.585", 0.125: "0.125", 2: "2"}
    assert identity.format_values([0.1, 0.2]) == {0.1: "0.1", 0.2: "0.2"}


def test_categorical_keys_name_a_variant_before_numbers() -> None:
    configs = {f"{method}/lr{lr}/seed0": {"method": method, "lr_scale": lr, "seed": 0}
               for method in ("grpo", "prompt_gdro") for lr in (1.0, 2.0)}
    # in the study's folder, as the simulator writes it (grpo_matched_<target>/seed<k>)
    configs["grpo_matched_prompt_gdro/seed0"] = {"method": "grpo", "lr_scale": 1.63, "matched_to": "prompt_gdro",
                                                 "seed": 0}
    grouping = identity.group_runs(configs)
    assert grouping.keys == ("method", "matched_to", "lr_scale")
    assert grouping.group_of["grpo_matched_prompt_gdro/seed0"] == "grpo matched_to=prompt_gdro lr×1.63"
    assert grouping.group_of["grpo/lr2.0/seed0"] == "grpo lr×2", "a key the run lacks is left out of its name"


def test_two_copies_of_one_seed_are_not_seeds_of_one_group() -> None:
    # in two study folders: each named after its study
    configs = {"a/seed0": {"method": "grpo", "seed": 0}, "b/seed0": {"method": "grpo", "seed": 0},
               "a/seed1": {"method": "grpo", "seed": 1}}
    grouping = identity.group_runs(configs)
    assert grouping.group_of["a/seed0"] == grouping.group_of["a/seed1"] == "a: grpo"
    assert grouping.group_of["b/seed0"] == "b: grpo"
    # in one study: told apart by their folder
    configs = {"grpo/seed0": {"method": "grpo", "seed": 0}, "grpo_copy/seed0": {"method": "grpo", "seed": 0}}
    grouping = identity.group_runs(configs)
    assert grouping.group_of["grpo/seed0"] != grouping.group_of["grpo_copy/seed0"]
    assert "(grpo_copy)" in grouping.group_of["grpo_copy/seed0"]


def test_run_colours_tell_seeds_of_one_group_apart() -> None:
    configs = {f"grpo/seed{seed}": {"method": "grpo", "seed": seed} for seed in range(3)}
    grouping = identity.group_runs(configs)
    colours = run_colours(grouping, list(configs))
    assert len(set(colours.values())) == 3


def test_automatic_grouping_is_group_runs_and_kept_while_the_entries_are_the_same() -> None:
    from types import SimpleNamespace

    configs = _simulator_configs()
    runs = [SimpleNamespace(label=label, config=config, producer="gdro-lab simulator", problem=None)
            for label, config in configs.items()]
    broken = SimpleNamespace(label="broken", config={}, producer="", problem="no steps.jsonl")
    grouping, keys = identity.automatic_grouping([*runs, broken])
    expected = identity.group_runs(configs, producers={run.label: run.producer for run in runs})
    assert grouping == expected and "broken" not in grouping.group_of
    assert keys == sorted({key for config in configs.values() for key in identity.identity(config)})
    assert identity.automatic_grouping(runs)[0] is grouping  # the same entries: not grouped again
    changed = [*runs[:-1], SimpleNamespace(**{**vars(runs[-1]), "config": {**runs[-1].config, "lr_scale": 9.0}})]
    regrouped, _ = identity.automatic_grouping(changed)  # a changed run is a new entry: grouped again
    assert regrouped is not grouping and regrouped.group_of[runs[-1].label] != grouping.group_of[runs[-1].label]
