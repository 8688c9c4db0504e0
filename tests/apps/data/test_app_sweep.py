"""The Sweep view's numbers: the swept keys of a sweep, each method's final metric per setting with a
95% interval over its runs (3 or more), and the parallel coordinates, against the runs' own files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from root100 import Root100
from scipy import stats

from apps.data import loading, sweep
from gdro_lab.runformat.runlog import RunData


def _runs(root: Path, labels: list[str]) -> dict[str, RunData]:
    return {label: loading.load_run(root / label) for label in labels}


def _last(root: Path, label: str, metric: str) -> float:
    lines = [json.loads(line) for line in (root / label / "steps.jsonl").read_text().splitlines() if line.strip()]
    return float([line["scalars"][metric] for line in lines if line["scalars"].get(metric) is not None][-1])


def test_a_sweep_of_one_key_by_method(root100: Root100) -> None:
    runs = _runs(root100.root, list(root100.sweep))
    assert sweep.sweep_keys({label: run.config for label, run in runs.items()}) == ["world.transfer"]
    frame = sweep.sweep_frame(runs, "world.transfer", "mean_success", "last value")
    assert len(frame) == 6 and set(frame["method"]) == {"grpo", "prompt_gdro"}
    row = frame[(frame["method"] == "prompt_gdro") & (frame["value_of_key"] == 0.5)].iloc[0]
    seeds = [label for label in root100.sweep if "/cell1/prompt_gdro/" in label]
    assert row["value"] == pytest.approx(np.mean([_last(root100.root, label, "mean_success") for label in seeds]))
    assert row["n"] == 2 and np.isnan(row["lo"]), "2 runs: no interval"


def test_the_study_sweeps_the_learning_rate_first_with_intervals(root100: Root100) -> None:
    runs = _runs(root100.root, [label for label in root100.study if "matched" not in label])
    keys = sweep.sweep_keys({label: run.config for label, run in runs.items()})
    assert keys[0] == "lr_scale"
    frame = sweep.sweep_frame(runs, "lr_scale", "mean_success", "last value")
    row = frame[(frame["method"] == "rollout_gdro") & (frame["value_of_key"] == 1.0)].iloc[0]
    values = [_last(root100.root, label, "mean_success") for label in runs if "/rollout_gdro/lr1/" in label]
    half = stats.t.ppf(0.975, 4) * np.std(values, ddof=1) / np.sqrt(5)
    assert row["n"] == 5 and row["value"] == pytest.approx(np.mean(values))
    assert (row["lo"], row["hi"]) == (pytest.approx(np.mean(values) - half), pytest.approx(np.mean(values) + half))
    assert list(frame[frame["method"] == "grpo"]["value_of_key"]) == pytest.approx([2 ** (k / 2) for k in range(-3, 3)])
    parallel = sweep.parallel_frame(runs, ["lr_scale"], "mean_success", "last value")
    lr = parallel[parallel["axis"] == "lr_scale"]
    assert lr["position"].min() == 0 and lr["position"].max() == 1
    middle = lr[lr["raw"] == "1.0"]["position"].iloc[0]
    assert middle == pytest.approx(3 / 5), "lr on a log axis: 1 is 3 of 5 sqrt(2) steps from 2**-1.5"


def test_a_step_matched_baseline_is_a_line_of_its_own_not_a_swept_setting(root100: Root100) -> None:
    runs = _runs(root100.root, list(root100.study))  # with the step-matched GRPO baselines
    keys = sweep.sweep_keys({label: run.config for label, run in runs.items()})
    assert keys == ["lr_scale"], "matched_to / match name a line; they are not swept"
    frame = sweep.sweep_frame(runs, "lr_scale", "mean_success", "last value")
    matched = [label for label in root100.study if "/grpo_matched_prompt_gdro_first/" in label]
    line = frame[frame["method"] == "grpo (matched to prompt_gdro, first)"]
    assert len(line) == 1 and line.iloc[0]["n"] == len(matched) >= 3
    assert line.iloc[0]["value"] == pytest.approx(np.mean([_last(root100.root, label, "mean_success")
                                                           for label in matched]))
    assert set(frame["method"]) == {"grpo", "prompt_gdro", "rollout_gdro", "grpo (matched to prompt_gdro, first)",
                                    "grpo (matched to prompt_gdro, second)"}
    grpo = frame[frame["method"] == "grpo"]
    assert grpo["n"].tolist() == [5] * len(grpo), "the plain GRPO points hold only plain GRPO runs"


def test_parallel_coordinates_label_each_axis_end_once_in_short_numbers(root100: Root100) -> None:
    from apps.views import charts

    runs = _runs(root100.root, [label for label in root100.study if "matched" not in label])
    parallel = sweep.parallel_frame(runs, ["lr_scale"], "mean_success", "last value")
    spec = charts.parallel_coordinates(parallel, ["lr_scale", "mean_success"], {}).to_dict()
    labels = [row["label"] for layer in spec["layer"] if "label" in str(layer["encoding"].get("text", ""))
              for row in spec["datasets"][layer["data"]["name"]]]
    assert len(labels) == 4, "one label per axis end, not one per run"
    high = max(_last(root100.root, label, "mean_success") for label in runs)
    assert f"{high:.4g}" in labels and "2" in labels and all(len(label) <= 6 for label in labels), labels
