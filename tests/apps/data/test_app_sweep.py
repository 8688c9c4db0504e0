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


def test_parallel_axes_have_ticks_and_the_largest_method_is_drawn_first(root100: Root100) -> None:
    from apps.views import charts

    labels = [label for label in root100.study if "matched" not in label
              and ("/prompt_gdro/" in label or "/rollout_gdro/lr1/" in label or "/grpo/lr2/" in label
                   or "/grpo/lr1/" in label)]
    runs = _runs(root100.root, labels)  # 30 Prompt-GDRO runs, 10 GRPO, 5 Rollout-GDRO
    ticks = sweep.parallel_ticks(runs, ["lr_scale"], "mean_success", "last value")
    lr = ticks[ticks["axis"] == "lr_scale"]
    assert lr["label"].tolist() == ["0.3536", "0.5", "0.7071", "1", "1.414", "2"], "a tick at each grid value"
    assert lr["position"].tolist() == pytest.approx([0, 0.2, 0.4, 0.6, 0.8, 1.0]), "on a log axis"
    metric = ticks[ticks["axis"] == "mean_success"]
    finals = [_last(root100.root, label, "mean_success") for label in labels]
    assert len(metric) == 5 and metric["label"].iloc[0] == f"{min(finals):.4g}" \
        and metric["label"].iloc[-1] == f"{max(finals):.4g}", "ticks along the axis, not only its ends"
    parallel = sweep.parallel_frame(runs, ["lr_scale"], "mean_success", "last value")
    spec = charts.parallel_coordinates(parallel, ["lr_scale", "mean_success"], {}, ticks).to_dict()
    drawn = [spec["datasets"][layer["data"]["name"]][0]["method"] for layer in spec["layer"]
             if layer["mark"]["type"] == "line"]
    assert drawn == ["prompt_gdro", "grpo", "rollout_gdro"], "largest first: the smallest method on top"
    texts = [row["label"] for layer in spec["layer"] if layer["encoding"].get("text", {}).get("field") == "label"
             for row in spec["datasets"][layer["data"]["name"]]]
    assert len(texts) == 11, "every tick labelled"


def test_a_brush_keeps_the_runs_inside_it_on_every_brushed_axis(root100: Root100) -> None:
    runs = _runs(root100.root, [label for label in root100.study if "matched" not in label])
    axes = ["lr_scale", "mean_success"]
    parallel = sweep.parallel_frame(runs, ["lr_scale"], "mean_success", "last value")
    ranges = sweep.brush_ranges({"axis_index": [0.2, -0.2], "position": [0.3, 0.5]}, axes)
    assert ranges == {"lr_scale": (0.3, 0.5)}, "a brush over the first axis only"
    kept = sweep.runs_in_brush(parallel, ranges)
    assert sorted(kept) == sorted(label for label in runs if "/lr0.707107/" in label), "lr 0.7071 sits at 0.4"
    finals = {label: _last(root100.root, label, "mean_success") for label in runs}
    low, high = min(finals.values()), max(finals.values())
    both = sweep.brush_ranges({"axis_index": [-0.3, 1.2], "position": [0.3, 0.7]}, axes)
    assert set(both) == set(axes)
    inside = [label for label in runs if "/lr0.707107/" in label or "/lr1/" in label
              if 0.3 <= (finals[label] - low) / (high - low) <= 0.7]
    assert sorted(sweep.runs_in_brush(parallel, both)) == sorted(inside), "inside the range on both axes"
    assert sweep.runs_in_brush(parallel, sweep.brush_ranges({}, axes)) == list(runs), "no brush: every run"
    table = sweep.run_table(parallel[parallel["label"].isin(kept)])
    assert len(table) == len(kept) and list(table.columns) == ["run", "method", *axes]


def test_brushes_on_two_axes_keep_each_range_and_narrow_the_runs(root100: Root100) -> None:
    """Vega-Lite draws one rectangle at a time: a rectangle on another axis holds the first one's
    range, so lr 0.7071 and the upper half of the metric together keep the runs inside both."""
    runs = _runs(root100.root, [label for label in root100.study if "matched" not in label])
    axes = ["lr_scale", "mean_success"]
    parallel = sweep.parallel_frame(runs, ["lr_scale"], "mean_success", "last value")
    finals = {label: _last(root100.root, label, "mean_success") for label in runs}
    low, high = min(finals.values()), max(finals.values())
    on_lr = sweep.brush_ranges({"axis_index": [-0.2, 0.2], "position": [0.3, 0.5]}, axes)
    on_metric = sweep.brush_ranges({"axis_index": [0.8, 1.2], "position": [0.5, 1.0]}, axes)
    brushes = sweep.Brushes.empty()
    assert brushes.step(on_lr) == on_lr and brushes.shown_held() == {}, "one rectangle: its range, nothing held"
    assert brushes.step(on_lr) == on_lr, "a rerun with the same rectangle changes nothing"
    both = brushes.step(on_metric)
    assert both == {**on_lr, **on_metric} and brushes.shown_held() == on_lr, "the lr rectangle is held (grey)"
    inside = [label for label in runs if "/lr0.707107/" in label and (finals[label] - low) / (high - low) >= 0.5]
    lr_only = [label for label in runs if "/lr0.707107/" in label]
    assert 0 < len(inside) < len(lr_only), "the second axis narrows the first one's runs"
    assert sorted(sweep.runs_in_brush(parallel, both)) == sorted(inside)
    assert brushes.step({}) == on_lr, "dropping the live rectangle keeps the held one"
    wider = {"lr_scale": (0.2, 0.5)}
    assert brushes.step(wider) == wider and brushes.shown_held() == {}, "a new rectangle on a held axis replaces it"
    assert brushes.step(on_metric) == {**wider, **on_metric}, "and is held in its turn"
    brushes.clear()
    assert brushes.step({}) == {} and sweep.runs_in_brush(parallel, {}) == list(runs), "cleared: every run"


def test_held_brushes_are_drawn_and_fade_the_runs_outside_them(root100: Root100) -> None:
    from apps.views import charts

    runs = _runs(root100.root, [label for label in root100.study if "matched" not in label])
    axes = ["lr_scale", "mean_success"]
    parallel = sweep.parallel_frame(runs, ["lr_scale"], "mean_success", "last value")
    held = {"mean_success": (0.5, 1.0)}
    inside = set(sweep.runs_in_brush(parallel, held))
    frame = parallel.assign(held_out=[0 if label in inside else 1 for label in parallel["label"]])
    spec = charts.parallel_coordinates(frame, axes, {}, None, held).to_dict()
    bands = [spec["datasets"][layer["data"]["name"]] for layer in spec["layer"] if layer["mark"]["type"] == "rect"]
    assert len(bands) == 1 and [(row["low"], row["high"]) for row in bands[0]] == [(0.5, 1.0)], "one band"
    assert bands[0][0]["left"] < 1 < bands[0][0]["right"], "on the metric's axis (the second)"
    lines = [layer for layer in spec["layer"] if layer["mark"]["type"] == "line"]
    assert lines and all("held_out" in layer["encoding"]["opacity"]["condition"]["test"] for layer in lines)
    rows = [row for layer in lines for row in spec["datasets"][layer["data"]["name"]]]
    assert {row["label"] for row in rows if row["held_out"] == 0} == inside
    assert not any(layer["mark"]["type"] == "rect" for layer in
                   charts.parallel_coordinates(parallel, axes, {}, None).to_dict()["layer"]), "no band unheld"
