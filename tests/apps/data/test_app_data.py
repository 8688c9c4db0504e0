"""apps.data: the frames the app and the reports plot, checked against naive loops over the run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from gdro_app_synthetic import write_synthetic_run

from apps.data import budget, curriculum, loading, results
from apps.data.settings import AppSettings, resolve_settings, script_arguments
from gdro_lab.functional import diagnostics
from gdro_lab.runformat.runlog import RunData


@pytest.fixture(scope="module")
def run(synthetic_run: Path) -> RunData:
    return loading.load_run(synthetic_run)


def test_heatmap_frame_has_one_cell_per_step_and_bin(run: RunData) -> None:
    frame = curriculum.heatmap_frame(run, "share")
    assert len(frame) == run.steps.size * run.num_bins
    for _, row in frame.sample(20, random_state=0).iterrows():
        t = int(np.flatnonzero(run.steps == row["step"])[0])
        assert row["value"] == run.bins["share"][t, int(row["bin"])]
        assert row["step_end"] == row["step"] + 1
        assert row["label"] == f"accbin_{int(row['bin'])}"


def test_heatmap_frame_averages_blocks_of_a_long_run(run: RunData) -> None:
    frame = curriculum.heatmap_frame(run, "weight", max_columns=7)
    block = 5  # ceil(30 / 7)
    assert frame["step"].nunique() == 6
    first = frame[frame["step"] == 0].sort_values("bin")["value"].to_numpy()
    np.testing.assert_allclose(first, run.bins["weight"][:block].mean(axis=0))
    assert frame["step_end"].max() == 30


def test_missing_field_gives_an_empty_frame(run: RunData) -> None:
    assert curriculum.heatmap_frame(run, "no_such_field").empty
    assert curriculum.snapshot_frame(run, "no_such_field").empty


def test_snapshots_are_the_papers_four_rows_and_the_tail_average(run: RunData) -> None:
    frame = curriculum.snapshot_frame(run, "share")
    names = list(frame.drop_duplicates("snapshot").sort_values("order")["snapshot"])
    assert names == ["start (step 0)", "early-mid (step 9)", "late-mid (step 19)", "end (step 29)",
                     "tail average (≥60th pct)"]
    tail = frame[frame["order"] == 4].sort_values("bin")["value"].to_numpy()
    np.testing.assert_allclose(tail, run.bins["share"][18:].mean(axis=0))


def test_lead_lag_matches_equation_32_by_hand(run: RunData) -> None:
    frame = curriculum.lead_lag_frame(run)
    index = np.arange(run.num_bins)
    for t in (0, 11, 29):
        weight = run.bins["weight"][t] / run.bins["weight"][t].sum()
        share = run.bins["share"][t] / run.bins["share"][t].sum()
        row = frame.iloc[t]
        assert row["mu_weight"] == pytest.approx(index @ weight)
        assert row["mu_data"] == pytest.approx(index @ share)
        assert row["gap"] == pytest.approx(index @ weight - index @ share)
    assert frame["gap"].iloc[0] > 0 and frame["gap"].iloc[0] > frame["gap"].iloc[-1], "the lead decays"


def test_lead_lag_skips_steps_without_assigned_prompts(run: RunData) -> None:
    bins = dict(run.bins)
    bins["share"] = run.bins["share"].copy()
    bins["share"][:4] = 0.0  # a run's first steps: every prompt is still unassigned
    frame = curriculum.lead_lag_frame(RunData(run.path, run.meta, run.config, run.steps, run.scalars, bins))
    assert list(frame["step"][:2]) == [4, 5]


def test_lead_lag_falls_back_to_logged_scalars(run: RunData) -> None:
    scalars_only = RunData(run.path, run.meta, run.config, run.steps, run.scalars,
                           {k: v for k, v in run.bins.items() if k != "weight"})
    frame = curriculum.lead_lag_frame(scalars_only)
    np.testing.assert_allclose(frame["gap"], run.scalars["lead_lag_gap"])


def test_budget_check_holds_and_catches_an_overspend(run: RunData) -> None:
    check = budget.budget_check(run)
    assert check is not None and check.held and check.target == 4.0
    overspent = dict(run.scalars)
    overspent["mean_rollouts"] = run.scalars["mean_rollouts"].copy()
    overspent["mean_rollouts"][12] = 4.5
    broken = RunData(run.path, run.meta, run.config, run.steps, overspent, run.bins)
    check = budget.budget_check(broken)
    assert check is not None and not check.held
    assert check.worst_step == 12 and check.max_deviation == pytest.approx(0.5)


def test_budget_check_from_bins_is_the_count_weighted_mean(run: RunData) -> None:
    bins_only = RunData(run.path, run.meta, run.config, run.steps,
                        {k: v for k, v in run.scalars.items() if k != "mean_rollouts"}, run.bins)
    check = budget.budget_check(bins_only)
    assert check is not None
    counts, rollouts = run.bins["count"], np.nan_to_num(run.bins["rollouts"])
    expected = [(counts[t] * rollouts[t]).sum() / counts[t].sum() for t in range(run.steps.size)]
    np.testing.assert_allclose(check.frame["realized"], expected)
    assert check.held


def test_frontier_shares_sum_to_one_and_multiples_match(run: RunData) -> None:
    frontier = budget.frontier_frame(run, 20)
    assert frontier["prompt_share"].sum() == pytest.approx(1.0)
    assert frontier["rollout_share"].sum() == pytest.approx(1.0)
    live = frontier["prompt_share"] > 0
    np.testing.assert_allclose(frontier.loc[live, "multiple"],
                               np.nan_to_num(run.bins["rollouts"][20])[live] / 4.0)
    prompts, rollouts = budget.frontier_split(frontier, 0)
    assert (prompts, rollouts) == (pytest.approx(1.0), pytest.approx(1.0))


def test_se_frame_recomputed_from_bins_matches_logged_scalars(run: RunData) -> None:
    logged = budget.se_frame(run)
    no_scalars = RunData(run.path, run.meta, run.config, run.steps,
                         {k: v for k, v in run.scalars.items() if not k.startswith("se_")}, run.bins)
    recomputed = budget.se_frame(no_scalars)
    pd.testing.assert_frame_equal(logged.reset_index(drop=True), recomputed.reset_index(drop=True),
                                  check_dtype=False)
    assert budget.mean_reduction(logged) == pytest.approx(np.mean(run.scalars["se_reduction_pct"]))


def test_rollout_settings_come_from_the_config_or_the_paper(run: RunData) -> None:
    assert budget.rollout_settings(run) == budget.RolloutSettings(4.0, 2.0, 12.0, "config")
    bare = RunData(run.path, run.meta, {"deep": [{"n_max": 8}]}, run.steps, run.scalars, run.bins)
    settings = budget.rollout_settings(bare)
    assert (settings.n_bar, settings.n_min, settings.n_max) == (4.0, 2.0, 8.0)
    assert "n_bar" in settings.source and "n_max" not in settings.source


def test_outcomes_fall_back_to_the_diagnostics(run: RunData) -> None:
    logged = results.outcomes_frame(run)
    stripped = RunData(run.path, run.meta, run.config, run.steps, {}, run.bins)
    computed = results.outcomes_frame(stripped)
    np.testing.assert_allclose(computed["worst_bin_success"], logged["worst_bin_success"])
    np.testing.assert_allclose(computed["effective_support"], logged["effective_support"])
    np.testing.assert_allclose(computed["mean_success"], logged["mean_success"])
    assert computed["worst_bin_success"].iloc[3] == diagnostics.worst_group(run.bins["success"][3])


def test_evaluations_and_pass_at_k(run: RunData) -> None:
    evals = results.evals_frame(run)
    assert sorted(evals["step"].unique()) == [0, 10, 20, 29]
    assert results.pass_at_k_metrics(evals) == ["pass@1", "pass@8"]
    assert results.accuracy_metrics(evals) == ["accuracy", "worst_group_accuracy"]
    latest = results.latest_evals(evals)
    assert list(latest["metric"]) == ["accuracy", "pass@1", "pass@8", "rollouts_total", "worst_group_accuracy"]


def test_compare_frame_and_table(run: RunData) -> None:
    frame = results.compare_frame({"a": run, "b": run}, "mean_success")
    assert list(frame["run"].unique()) == ["a", "b"] and len(frame) == 60
    gap = results.compare_frame({"a": run}, "lead_lag_gap")
    np.testing.assert_allclose(gap["value"], curriculum.lead_lag_frame(run)["gap"])
    table = results.compare_table({"a": run}, ["mean_success"])
    assert table.loc[0, "mean_success (final)"] == run.scalars["mean_success"][-1]
    assert table.loc[0, "mean_success (tail)"] == pytest.approx(run.scalars["mean_success"][18:].mean())
    assert results.compare_frame({"a": run}, "no_such_metric").empty


def test_config_rows_flatten_nested_keys() -> None:
    rows = results.config_rows({"a": 1, "b": {"c": [1, 2], "d": {}}})
    assert list(rows["key"]) == ["a", "b.c", "b.d"]
    assert list(rows["value"]) == ["1", "[1, 2]", "{}"]


def test_discover_runs_lists_given_runs_first_with_unique_labels(tmp_path: Path) -> None:
    first = write_synthetic_run(tmp_path / "a" / "seed0", steps=3)
    second = write_synthetic_run(tmp_path / "b" / "seed0", steps=3)
    outside = tmp_path / "elsewhere" / "missing"
    entries = loading.discover_runs(tmp_path / "a", [outside, second, first])
    assert [entry.label for entry in entries] == ["missing", "seed0", "seed0 (a)"]
    assert [entry.path for entry in entries] == [outside, second, first]


def test_run_signature_changes_when_a_run_grows(synthetic_run: Path, tmp_path: Path) -> None:
    path = write_synthetic_run(tmp_path / "grow", steps=3)
    before = loading.run_signature(path)
    with open(path / "steps.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"step": 3, "scalars": {}, "bins": {}}) + "\n")
    assert loading.run_signature(path) != before
    assert loading.run_signature(tmp_path / "nothing")[0] == ("meta.json", -1, -1)


def test_load_run_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(loading.RunLoadError, match="does not exist"):
        loading.load_run(tmp_path / "missing")
    path = write_synthetic_run(tmp_path / "bad", steps=3)
    (path / "steps.jsonl").write_text('{"step": 0, "scalars": {"x": "text"}, "bins": {}}\n')
    with pytest.raises(loading.RunLoadError, match="malformed record") as caught:
        loading.load_run(path)
    assert "\n" not in str(caught.value)


def test_settings_from_arguments_then_environment(tmp_path: Path) -> None:
    environ = {"GDRO_APP_ROOT": str(tmp_path), "GDRO_APP_RUNS": os.pathsep.join(["x", "y"])}
    assert resolve_settings(None, environ) == AppSettings(tmp_path, (Path("x"), Path("y")))
    assert resolve_settings(["--root", "r", "z"], environ) == AppSettings(Path("r"), (Path("z"),))
    assert resolve_settings(None, {}) == AppSettings(Path("runs"), ())
    script = str(tmp_path / "app.py")
    assert script_arguments([script, "--root", "r"], script) == ["--root", "r"]
    assert script_arguments(["pytest", "tests"], script) is None


def test_run_search_is_bounded_and_skips_hidden_folders(tmp_path: Path) -> None:
    shallow = write_synthetic_run(tmp_path / "a", steps=2)
    deep = write_synthetic_run(tmp_path / "b" / "c" / "d", steps=2)
    write_synthetic_run(tmp_path / ".hidden" / "run", steps=2)
    assert loading.find_run_dirs(tmp_path) == ([shallow, deep], False)
    assert loading.find_run_dirs(tmp_path, max_depth=2) == ([shallow], True)
    assert loading.find_run_dirs(shallow) == ([shallow], False)
    assert loading.find_run_dirs(tmp_path / "missing") == ([], False)
