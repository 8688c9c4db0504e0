"""What gdro calibrate reads: samples files and gdro-train run directories, and their bad inputs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gdro_lab import ConfigError, RunWriter
from simulators.calibrate.observe import read_samples, read_sweep


def write_samples(path: Path, rows: list[tuple[str, str, list[bool]]], torn: str = "") -> Path:
    path.mkdir(parents=True)
    with open(path / "eval_samples_step0.jsonl", "w", encoding="utf-8") as handle:
        for prompt, group, outcomes in rows:
            for j, ok in enumerate(outcomes):
                handle.write(json.dumps({"id": prompt, "sample": j, "success": bool(ok), "text": "x", "group": group,
                                         "source": "bench"}) + "\n")
        handle.write(torn)
    return path


def rows(count: int = 20) -> list[tuple[str, str, list[bool]]]:
    rng = np.random.default_rng(0)
    return [(f"q{i}", "alg" if i % 3 else "geo", list(rng.random(4) < 0.4)) for i in range(count)]


def test_samples_are_counted_per_prompt_with_their_groups(tmp_path: Path) -> None:
    given = rows()
    data = read_samples([write_samples(tmp_path / "eval", given, torn='{"id": "q1", "sam')])
    assert data.group_names == ("alg", "geo")
    by_id = {prompt: (group, sum(outcomes)) for prompt, group, outcomes in given}
    for i, prompt in enumerate(sorted(by_id)):
        assert data.group_names[data.group_P[i]] == by_id[prompt][0]
        assert data.successes_P[i] == by_id[prompt][1] and data.samples_P[i] == 4


def test_bad_samples_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        read_samples([tmp_path / "missing"])
    with pytest.raises(ConfigError, match="only 3 prompts"):
        read_samples([write_samples(tmp_path / "few", rows(3))])
    bad = write_samples(tmp_path / "bad", rows())
    with open(bad / "eval_samples_step0.jsonl", "r+", encoding="utf-8") as handle:
        lines = handle.readlines()
        lines[2] = '{"sample": 1}\n'
        handle.seek(0)
        handle.writelines(lines)
    with pytest.raises(ConfigError, match=r"eval_samples_step0.jsonl:3: not a samples record"):
        read_samples([bad])
    two = write_samples(tmp_path / "two", rows() + [("q1", "other", [True])])
    with pytest.raises(ConfigError, match="two group labels"):
        read_samples([two])


def trainer_run(path: Path, lr: float, method: str = "grpo", batch: int = 16, groups: tuple[str, ...] = ("alg", "geo"),
                steps: int = 6) -> Path:
    config = {"method": {"name": method, "n_bar": 4}, "train": {"prompts_per_step": batch},
              "loss": {"agg": "token-mean"}, "eval": {"k": 8}, "rollout": {"temperature": 1.0},
              "optim": {"lr": lr, "lr_scale": 2.0}}
    with RunWriter(path, config, num_bins=1, producer="gdro train", bin_labels=["all"]) as writer:
        for t in range(1, steps + 1):
            writer.log_step(t, {"mean_success": 0.1 * t}, {})
        for step in (3, 6):
            metrics = {"pooled/mean@8": 0.5, "pooled/mean@8_lo": 0.4, "pooled/mean@8_hi": 0.6}
            for g, name in enumerate(groups):
                metrics.update({f"group/{name}/mean@8": 0.3 + g * 0.1 + step / 100, f"group/{name}/mean@8_lo": 0.2,
                                f"group/{name}/mean@8_hi": 0.2 + 2 * 1.96 * 0.05})
            writer.log_eval(step, metrics)
    return path


def test_sweep_reads_lr_curves_and_group_evals(tmp_path: Path) -> None:
    runs = [trainer_run(tmp_path / f"r{i}", lr) for i, lr in enumerate((3e-6, 1e-6))]
    sweep = read_sweep(runs, ("alg", "geo"))
    np.testing.assert_allclose(sweep.lrs, [2e-6, 6e-6])  # lr x lr_scale, sorted
    assert (sweep.batch, sweep.n, sweep.steps, sweep.aggregation) == (16, 4, 6, "rollout")
    run = sweep.runs[0]
    np.testing.assert_allclose(run.success_T, 0.1 * np.arange(1, 7))
    np.testing.assert_array_equal(run.eval_steps_E, [3, 6])
    np.testing.assert_allclose(run.heldout_EK[:, 1], [0.43, 0.46])
    np.testing.assert_allclose(run.heldout_se_EK, 0.05)


def test_sweep_falls_back_to_pooled_when_groups_differ(tmp_path: Path) -> None:
    runs = [trainer_run(tmp_path / f"r{i}", lr, groups=("math500",)) for i, lr in enumerate((1e-6, 2e-6))]
    sweep = read_sweep(runs, ("alg", "geo"))
    assert sweep.group_names == ("pooled",)
    np.testing.assert_allclose(sweep.runs[0].heldout_EK[:, 0], 0.5)


@pytest.mark.parametrize("change,message", [({"method": "prompt_gdro"}, "must be plain GRPO"),
                                            ({"batch": 32}, "differ only in the learning rate"),
                                            ({"lr": 1e-6}, "share a learning rate")])
def test_bad_sweeps_are_one_line_errors(tmp_path: Path, change: dict, message: str) -> None:
    first = trainer_run(tmp_path / "a", 1e-6)
    second = trainer_run(tmp_path / "b", change.get("lr", 3e-6), method=change.get("method", "grpo"),
                         batch=change.get("batch", 16))
    with pytest.raises(ConfigError, match=message):
        read_sweep([first, second], ("alg", "geo"))
    with pytest.raises(ConfigError, match="at least 2"):
        read_sweep([first], ("alg",))
    with pytest.raises(ConfigError, match="not a run directory|no meta.json|--sweep"):
        read_sweep([first, tmp_path / "nothing"], ("alg",))


def test_a_group_measured_by_two_halves_is_their_mean(tmp_path: Path) -> None:
    """The LM study's held-out halves: group/lmstudy_val_add:add and group/lmstudy_test_add:add -> group 'add'."""
    runs = []
    for i, lr in enumerate((1e-6, 2e-6)):
        path = tmp_path / f"r{i}"
        config = {"method": {"name": "grpo", "n_bar": 4}, "train": {"prompts_per_step": 8},
                  "loss": {"agg": "token-mean"}, "eval": {"k": 8}, "rollout": {"temperature": 1.0}, "optim": {"lr": lr}}
        with RunWriter(path, config, num_bins=1, producer="gdro train", bin_labels=["all"]) as writer:
            writer.log_step(1, {"mean_success": 0.2}, {})
            metrics = {}
            for half, value, se in (("val", 0.30, 0.02), ("test", 0.40, 0.04)):
                name = f"group/lmstudy_{half}_add:add/mean@8"
                metrics.update({name: value, name + "_lo": value - 1.96 * se, name + "_hi": value + 1.96 * se})
            writer.log_eval(1, metrics)
        runs.append(path)
    sweep = read_sweep(runs, ("add",))
    assert sweep.group_names == ("add",)
    assert sweep.runs[0].heldout_EK[0, 0] == pytest.approx(0.35)
    assert sweep.runs[0].heldout_se_EK[0, 0] == pytest.approx(np.hypot(0.02, 0.04) / 2)
