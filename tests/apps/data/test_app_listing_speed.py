"""What the run list's shortcuts at 1,000 runs keep: a config flattened once still gives a fresh dict
each call (a caller's change never reaches the next one), and runs found under the root are labelled
and kept without resolving each path, a run also given on the command line listed once."""

from __future__ import annotations

from pathlib import Path

from apps.data import identity
from apps.data.loading import discover_runs, find_run_dirs
from gdro_app_synthetic import write_synthetic_run


def test_a_flattened_config_is_a_fresh_dict_each_call() -> None:
    config = {"method": "grpo", "world": {"lr_shared": 0.01, "groups": [1, 2]}, "seed": 3}
    first = identity.flatten(config)
    assert first == {"method": "grpo", "world.lr_shared": 0.01, "world.groups": "[1, 2]", "seed": 3}
    for _ in range(2):  # the first answer, then a remembered one
        identity.flatten(config)["method"] = "changed by a caller"
        assert identity.flatten(config) == first
    assert identity.flatten(dict(config, seed=4))["seed"] == 4, "another config object is flattened anew"


def test_found_runs_are_labelled_relative_to_the_root_and_a_given_one_listed_once(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    for label in ("a/grpo/seed0", "a/grpo/seed1", "b/vip"):
        write_synthetic_run(root / label, steps=3, num_bins=3)
    found, truncated = find_run_dirs(root)
    entries = discover_runs(root, [root / "b" / ".." / "b" / "vip"], found)
    assert not truncated
    assert [entry.label for entry in entries] == ["b/vip", "a/grpo/seed0", "a/grpo/seed1"]
    assert [entry.label for entry in discover_runs(root, [], found)] == ["a/grpo/seed0", "a/grpo/seed1", "b/vip"]


def test_config_columns_of_every_producer_are_the_keys_that_differ_within_their_producer() -> None:
    from apps.data.listing import RunInfo
    from apps.data.loading import RunEntry
    from apps.data.runtable import config_keys

    def info(label: str, producer: str, config: dict) -> RunInfo:
        return RunInfo(RunEntry(Path(label), label), {"producer": producer, "status": "finished"}, config)

    simulated = [info(f"sim{i}", "gdro-lab simulator", {"method": "grpo", "lr_scale": scale, "steps": 400})
                 for i, scale in enumerate((0.5, 1.0))]
    trained = [info(f"lm{i}", "gdro train", {"train": {"seed": i, "steps": 60}, "optim": {"lr": 1e-6}})
               for i in range(2)]
    only_one = [info("sim2", "gdro-lab simulator", {"method": "grpo", "lr_scale": 1.0, "steps": 400, "extra": 1})]
    assert config_keys([*simulated, *trained]) == ["lr_scale", "train.seed"]
    assert config_keys([*simulated, *only_one, *trained]) == ["lr_scale", "extra", "train.seed"], \
        "a key some runs of its producer lack differs"
    assert config_keys([*simulated, *trained], producer="gdro train") == ["train.seed"]


def test_config_columns_are_remembered_for_the_same_run_list_and_follow_a_changed_run() -> None:
    from apps.data.listing import RunInfo
    from apps.data.loading import RunEntry
    from apps.data.runtable import config_columns

    def info(label: str, config: dict) -> RunInfo:
        return RunInfo(RunEntry(Path(label), label), {"producer": "gdro-lab simulator", "status": "finished"}, config)

    runs = [info(f"sim{i}", {"method": "grpo", "lr_scale": 1.0, "seed": i}) for i in range(3)]
    flats, keys = config_columns(runs)
    assert keys == ["seed"]
    again, keys_again = config_columns(list(runs))  # a second visit: the same RunInfo objects
    assert again is flats and keys_again == keys, "remembered, not worked out again"
    keys_again.append("changed by a caller")
    assert config_columns(runs)[1] == ["seed"], "a caller's change never reaches the next one"
    changed = [*runs[:2], info("sim2", {"method": "grpo", "lr_scale": 2.0, "seed": 2})]  # a run's files changed
    assert config_columns(changed)[1] == ["lr_scale", "seed"]
    assert config_columns(changed, producer="gdro train")[1] == [], "each producer choice on its own"
