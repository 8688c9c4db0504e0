"""apps.data.study, apps.data.realrun, apps.data.runtable and the null shares: checked against hand computations."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from apps.data import curriculum, identity, listing, loading, realrun, runtable, study
from apps.views import interactive
from gdro_lab.runformat.runlog import RunData


def _runs(root: Path) -> dict[str, RunData]:
    return {loading.run_label(path, root): loading.load_run(path) for path in loading.find_run_dirs(root)[0]}


def test_seeds_group_by_config_without_the_seed(seeds_root: Path) -> None:
    methods = study.group_by_method(_runs(seeds_root))
    assert [(method.label, method.seeds) for method in methods] == [("grpo", 3), ("prompt_gdro", 3)]
    assert [label for label, _ in methods[0].runs] == ["grpo/seed0", "grpo/seed1", "grpo/seed2"]


def test_a_config_difference_besides_the_seed_makes_another_method(seeds_root: Path) -> None:
    runs = _runs(seeds_root)
    runs["grpo/seed1"].config["batch_prompts"] = 128
    try:
        labels = [method.label for method in study.group_by_method(runs)]
    finally:
        runs["grpo/seed1"].config["batch_prompts"] = 64
    assert labels == ["grpo batch_prompts=64", "grpo batch_prompts=128", "prompt_gdro batch_prompts=64"], \
        "named by the key that differs, not by a hash"


def test_bands_are_the_student_t_interval_over_seeds(seeds_root: Path) -> None:
    runs = _runs(seeds_root)
    methods = study.group_by_method(runs)
    band = study.band_frame(methods, "mean_success")
    row = band[(band["method"] == "prompt_gdro") & (band["step"] == 17)].iloc[0]
    values = [runs[f"prompt_gdro/seed{seed}"].scalars["mean_success"][17] for seed in range(3)]
    mean = sum(values) / 3
    sd = math.sqrt(sum((value - mean) ** 2 for value in values) / 2)
    half = 4.302652729911275 * sd / math.sqrt(3)  # t_{0.975, 2}
    assert row["value"] == pytest.approx(mean) and row["n"] == 3
    assert (row["lo"], row["hi"]) == (pytest.approx(mean - half), pytest.approx(mean + half))
    assert stats.t.ppf(0.975, 2) == pytest.approx(4.302652729911275)


def test_one_seed_has_no_interval() -> None:
    assert study.t_interval(np.array([0.5]))[1:] != study.t_interval(np.array([0.5, 0.6]))[1:]
    mean, lo, hi = study.t_interval(np.array([0.5, np.nan]))
    assert mean == 0.5 and np.isnan(lo) and np.isnan(hi)
    assert study.format_interval(0.5, lo, hi) == "0.5 (1 seed)"


def test_final_table_gives_intervals_with_worst_group(seeds_root: Path) -> None:
    runs = _runs(seeds_root)
    methods = study.group_by_method(runs)
    metrics = study.final_metrics(methods)
    assert "worst_bin_success" in metrics and "worst_group_accuracy" in metrics
    table = study.final_table(methods, metrics)
    tails = [study.final_value(runs[f"grpo/seed{seed}"], "worst_bin_success") for seed in range(3)]
    expected = study.t_interval(np.array(tails))
    row = table[table["method"] == "grpo"].iloc[0]
    assert row["seeds"] == 3
    assert (row["worst_bin_success mean"], row["worst_bin_success lo"], row["worst_bin_success hi"]) == \
        pytest.approx(expected)
    assert row["worst_bin_success"] == study.format_interval(*expected) and "[" in row["worst_bin_success"]
    values = runs["grpo/seed0"].scalars["worst_bin_success"]
    assert tails[0] == pytest.approx(np.nanmean(values[18:])), "tail = steps at or after the 60th percentile"


def test_ema_is_tensorboards_debiased_average() -> None:
    values = np.array([1.0, np.nan, 3.0, 5.0])
    out = interactive.ema(values, 0.5)
    assert out[0] == 1.0 and np.isnan(out[1])
    assert out[2] == pytest.approx((0.25 * 1 + 0.5 * 3) / 0.75)
    assert out[3] == pytest.approx((0.125 * 1 + 0.25 * 3 + 0.5 * 5) / 0.875)
    np.testing.assert_array_equal(interactive.ema(values, 0.0), values)


def test_series_colours_are_distinct_in_order() -> None:
    names = ["actual", "square-root optimum", "uniform n̄", "pooled", "worst group", "worst benchmark"]
    colours = interactive.series_colours(names)
    assert len(set(colours.values())) == len(names)
    assert colours["actual"] == "#1f77b4" and colours["square-root optimum"] == "#ff7f0e", "blue and orange"
    assert interactive.series_colours(names[:2]) == {name: colours[name] for name in names[:2]}, "by position"


def test_agreed_eval_names_are_parsed_with_their_bounds(real_run: Path) -> None:
    run = loading.load_run(real_run)
    frame = realrun.eval_metrics(run)
    last = run.evals[-1]["metrics"]
    row = frame[(frame["step"] == run.evals[-1]["step"]) & (frame["name"] == "aime24") & (frame["metric"] == "mean@8")]
    assert row[["value", "lo", "hi"]].iloc[0].tolist() == pytest.approx(
        [last["aime24/mean@8"], last["aime24/mean@8_lo"], last["aime24/mean@8_hi"]])
    assert set(frame["kind"]) == {"benchmark", "pooled", "worst_group", "worst_benchmark", "group"}
    assert set(frame.loc[frame["kind"] == "group", "name"]) == {"algebra", "geometry"}
    assert "rollouts_total" not in set(frame["metric"]), "names outside the convention are left out"
    table = realrun.latest_eval_table(frame)
    worst = table[table["kind"] == "worst_group"].iloc[0]
    value = last["worst_group/mean@8"]
    assert worst["mean@8"] == f"{value:.3f} [{last['worst_group/mean@8_lo']:.3f}, {last['worst_group/mean@8_hi']:.3f}]"


def test_step_time_breakdown_adds_up_to_the_step(real_run: Path) -> None:
    run = loading.load_run(real_run)
    frame = realrun.time_frame(run)
    per_step = frame.groupby("step")["seconds"].sum().to_numpy()
    np.testing.assert_allclose(per_step, run.scalars["time/step"])
    assert list(dict.fromkeys(frame["phase"])) == ["plan", "generate", "reward", "controllers", "logprobs",
                                                   "update", "sync", "other"]
    table = realrun.time_table(run)
    assert table["phase"].iloc[0] == "generate"
    assert table["share of step (%)"].sum() == pytest.approx(100.0)
    generate = run.scalars["time/generate"]
    assert table.set_index("phase").loc["generate", "mean s/step"] == pytest.approx(generate.mean())


def test_unassigned_steps_have_null_shares(real_run: Path) -> None:
    run = loading.load_run(real_run)
    assert np.isnan(run.bins["share"][:8]).all(), "no prompt assigned yet: null, not 0"
    assert np.isfinite(run.bins["share"][8:]).all()
    assert loading.unassigned_steps(run) == 8
    frame = curriculum.heatmap_frame(run, "share")
    assert frame[frame["step"] < 8]["value"].isna().all()
    gap = curriculum.lead_lag_frame(run)
    assert np.isfinite(gap["gap"]).all() and gap["step"].min() == 8


def test_run_table_search_and_config_diff(seeds_root: Path) -> None:
    runs = _runs(seeds_root)
    infos = listing.list_runs(seeds_root).runs
    grouping = identity.group_runs({info.label: info.config for info in infos})
    table = runtable.run_table(infos, grouping)
    assert len(table) == 6
    assert {"config.method", "config.seed", "config.prompt_gdro.enabled"} <= set(table.columns)
    assert "config.num_bins" not in table.columns, "only keys that differ, unless asked"
    assert "config.num_bins" in runtable.run_table(infos, grouping, all_config=True).columns
    row = table.set_index("run").loc["prompt_gdro/seed2"]
    assert (row["name"], row["method"], row["seed"], row["last step"]) == ("prompt_gdro · seed 2", "prompt_gdro", "2", 29)
    assert row["mean_success (last step)"] == pytest.approx(runs["prompt_gdro/seed2"].scalars["mean_success"][-1])
    assert list(runtable.search(table, "PROMPT seed2")["run"]) == ["prompt_gdro/seed2"]
    assert runtable.search(table, "").equals(table)
    diff = runtable.config_diff(runs["grpo/seed0"].config, runs["prompt_gdro/seed1"].config, ("a", "b"))
    expected = {key for key in runtable.flat_config(runs["grpo/seed0"].config)
                if runtable.flat_config(runs["grpo/seed0"].config)[key]
                != runtable.flat_config(runs["prompt_gdro/seed1"].config).get(key)}
    assert set(diff["key"]) == expected == {"method", "seed", "prompt_gdro.enabled"}
    assert diff.set_index("key").loc["method"].tolist() == ["grpo", "prompt_gdro"]
    missing = runtable.config_diff({"a": 1}, {"b": {"c": 2}})
    assert missing.values.tolist() == [["a", "1", "(absent)"], ["b.c", "(absent)", "2"]]


def test_torn_eval_line_and_folder_problems_are_named(copy_run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = copy_run("torn-eval")
    assert not loading.eval_tail_torn(path)
    with open(path / "eval.jsonl", "a", encoding="utf-8") as handle:
        handle.write('{"step": 40, "metrics": {"accu')
    run = loading.load_run(path)
    notes = loading.torn_notes(run)
    assert notes == ["the last line of eval.jsonl is cut short and was ignored: the run is finished, so the "
                     "file was damaged (e.g. a crash or a full disk)"]
    file = tmp_path / "runs.txt"
    file.write_text("x")
    assert "is a file, not a folder" in str(loading.folder_problem(file))
    assert "does not exist" in str(loading.folder_problem(tmp_path / "nowhere"))
    assert loading.folder_problem(tmp_path) is None
