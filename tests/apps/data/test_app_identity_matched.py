"""The app names every derived baseline (step-matched GRPO) by the top-level ``matched_to`` / ``match``
keys its producer writes: the simulator's studies (SimConfig) and the CPU LM study (label_matched)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from apps.data import identity


def _sim_payload(**fields: Any) -> dict[str, Any]:
    from simulators.loop import SimConfig, _config_payload

    return json.loads(json.dumps(_config_payload(SimConfig(**fields))))  # through the JSON of config.json


def test_simulator_step_matched_runs_are_named_by_their_match() -> None:
    configs = {}
    for seed in range(2):
        for method in ("grpo", "prompt_gdro"):
            for lr_scale in (0.707107, 1.0):
                configs[f"{method}/lr{lr_scale:g}/seed{seed}"] = _sim_payload(method=method, seed=seed,
                                                                              lr_scale=lr_scale)
        for target, kind, factor in (("prompt_gdro", "first", 1.7), ("prompt_gdro", "second", 2.16),
                                     ("joint", "first", 1.7), ("joint", "second", 2.3)):
            configs[f"grpo_matched_{target}_{kind}/seed{seed}"] = _sim_payload(
                method="grpo", seed=seed, lr_scale=factor, matched_to=target, match=f"{kind}_moment")
    grouping = identity.group_runs(configs)
    assert grouping.keys[:3] == ("method", "matched_to", "match"), "string keys name a variant before numbers"
    first = grouping.group_of["grpo_matched_prompt_gdro_first/seed1"]
    second = grouping.group_of["grpo_matched_prompt_gdro_second/seed0"]
    assert first == "grpo matched_to=prompt_gdro match=first_moment lr×1.7"
    assert second == "grpo matched_to=prompt_gdro match=second_moment lr×2.16"
    assert grouping.group_of["grpo_matched_joint_first/seed0"] == "grpo matched_to=joint match=first_moment lr×1.7"
    assert grouping.display("grpo_matched_prompt_gdro_second/seed1") == f"{second} · seed 1"
    # runs that are not derived baselines carry no marker and say nothing about one
    for run in ("grpo/lr1/seed0", "prompt_gdro/lr0.707107/seed1"):
        assert "matched_to" not in configs[run] and "match" not in grouping.group_of[run], run
    assert grouping.group_of["grpo/lr1/seed0"] == "grpo lr×1"
    assert len(grouping.groups) == 8, "4 grid cells and four step-matched GRPOs, seeds grouped"


@pytest.mark.parametrize("fields, needle", [
    ({"match": "first_moment"}, "matched_to"),              # a match without a method
    ({"matched_to": "prompt_gdro"}, "matched_to"),          # a method without a match
    ({"matched_to": "prompt_gdro", "match": "third"}, "match"),
])
def test_simulator_rejects_a_half_marker(fields: dict[str, Any], needle: str) -> None:
    from gdro_lab import ConfigError
    from simulators.loop import SimConfig

    with pytest.raises(ConfigError, match=needle):
        SimConfig(method="grpo", **fields)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the trainer (torch) is not installed")
def test_lm_study_step_matched_runs_are_labelled_and_still_load(tmp_path: Path) -> None:
    from real_runs.config import config_to_dict
    from real_runs.lmstudy.learning_study import QUICK, label_matched, run_name, trainer_config
    from real_runs.train_setup import load_run_config

    from gdro_lab.runformat.runlog import RunWriter

    configs = {}
    for name, adv_scale in (("grpo", 1.0), ("grpo_matched_first", 1.2), ("grpo_matched_second", 1.4),
                            ("prompt_gdro", 1.0)):
        for seed in range(2):
            config = config_to_dict(trainer_config(QUICK, name, seed, tmp_path, adv_scale=adv_scale, name=name))
            writer = RunWriter(tmp_path / run_name(name, seed), config, 10, "test")
            writer.close("finished" if seed == 0 else "failed")
    # only finished step-matched runs are labelled, once
    wrote = {p.name: label_matched(p) for p in sorted(tmp_path.iterdir())}
    assert wrote == {"grpo-s0": False, "grpo-s1": False, "grpo_matched_first-s0": True,
                     "grpo_matched_first-s1": False, "grpo_matched_second-s0": True,
                     "grpo_matched_second-s1": False, "prompt_gdro-s0": False, "prompt_gdro-s1": False}
    assert not label_matched(tmp_path / "grpo_matched_second-s0")  # idempotent
    for path in sorted(tmp_path.iterdir()):
        if path.name.endswith("-s0"):
            configs[path.name] = json.loads((path / "config.json").read_text(encoding="utf-8"))
    assert configs["grpo_matched_second-s0"]["match"] == "second_moment"
    grouping = identity.group_runs(configs)
    first, second = grouping.group_of["grpo_matched_first-s0"], grouping.group_of["grpo_matched_second-s0"]
    # one method is matched here, so `match` alone tells them apart (matched_to adds nothing to the name)
    assert first == "grpo match=first_moment" and second == "grpo match=second_moment"
    assert all(c["matched_to"] == "prompt_gdro" for n, c in configs.items() if "matched" in n)
    assert "match" not in grouping.group_of["grpo-s0"] and "match" not in grouping.group_of["prompt_gdro-s0"]
    # the labelled config is still the trainer's: the labels are not settings
    assert load_run_config(tmp_path / "grpo_matched_second-s0").loss.adv_scale == 1.4
