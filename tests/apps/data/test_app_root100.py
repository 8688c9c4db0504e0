"""The app's run list, names and damage flags on a generated root of 100+ runs (``root100``)."""

from __future__ import annotations

from root100 import Root100

from apps.data import identity, listing
from apps.data.groups import Grouping


def test_the_generated_root_holds_what_a_user_has(root100: Root100) -> None:
    listed = listing.list_runs(root100.root)
    labels = [info.label for info in listed.runs]
    assert len(root100.study) == 100 and len(root100.sweep) == 12 and len(root100.train) == 3
    assert sorted(labels) == sorted(root100.readable), "every run is listed, the truncated one too"
    assert [info.label for info in listed.problems] == [root100.newer]
    assert not any(label.startswith(root100.not_a_run) for label in labels)
    producers = {info.meta["producer"] for info in listed.runs}
    assert producers == {"gdro-lab simulator", "gdro train"}, producers


def _grouping(infos: list[listing.RunInfo]) -> Grouping:
    return identity.group_runs({info.label: info.config for info in infos},
                               producers={info.label: info.producer for info in infos})


def test_labels_are_stable_when_unrelated_runs_are_added(root100: Root100) -> None:
    infos = list(listing.list_runs(root100.root).runs)
    everything = _grouping(infos)
    for kind in (root100.study, root100.sweep, root100.train):
        alone = _grouping([info for info in infos if info.label in kind])
        changed = {run: (alone.display(run), everything.display(run)) for run in kind
                   if alone.display(run) != everything.display(run)}
        assert not changed, f"names changed when other studies were added: {list(changed.items())[:3]}"
    study = {everything.group_of[run] for run in root100.study}
    assert len(study) == 20, sorted(study)
    assert {"study: grpo lr×1", "study: prompt_gdro lr×0.354", "study: rollout_gdro lr×2"} <= study, sorted(study)
    assert {everything.group_of[run] for run in root100.sweep} == {
        f"sweep: {method} transfer={value}" for method in ("grpo", "prompt_gdro") for value in ("0", "0.5", "1")}
    assert everything.family_keys["study"] == ("method", "match", "lr_scale")
    # the two step-matched GRPO baselines of the study are told apart by their match
    matched = sorted({everything.group_of[run] for run in root100.study if "matched" in run})
    assert len(matched) == 2 and all(name.startswith("study: grpo match=") for name in matched), matched


def test_names_never_come_from_empty_values(root100: Root100) -> None:
    grouping = _grouping(list(listing.list_runs(root100.root).runs))
    names = [grouping.display(run) for run in root100.readable]
    assert not [name for name in names if "{}" in name or "=·" in name or "= " in name or name.endswith("=")]
    configs = {"grpo/seed0": {"method": "grpo", "seed": 0, "allocator": ""},
               "grpo/seed1": {"method": "grpo", "seed": 1, "allocator": "knapsack"}}
    labels = identity.group_runs(configs).group_of
    assert labels == {"grpo/seed0": "grpo", "grpo/seed1": "grpo allocator=knapsack"}
    flat = identity.group_runs({"x/seed0": {"method": "grpo", "seed": 0, "opt": {}},
                                "x/seed1": {"method": "grpo", "seed": 1, "opt": {"beta": 0.9}}})
    assert [name for name in flat.group_of.values() if "{}" in name] == []


def test_names_say_their_study_so_two_studies_never_share_one(root100: Root100) -> None:
    grouping = _grouping(list(listing.list_runs(root100.root).runs))
    # the trainer's prompt_gdro run and the truncated copy of a study run are both "prompt_gdro" in
    # their own folders: each says where it comes from
    assert grouping.group_of["train/prompt_gdro-tiny-s0"] == "train: prompt_gdro"
    assert grouping.group_of[root100.truncated] == "damaged: prompt_gdro"
    assert grouping.display("study/runs/grpo/lr1/seed3") == "study: grpo lr×1 · seed 3"
    assert len({grouping.group_of[run] for run in root100.readable}) == len(grouping.groups)
