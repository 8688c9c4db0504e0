"""Every view of the app, run with streamlit.testing's AppTest against tiny and synthetic runs."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest
from app_helpers import (PAGES, assert_clean, charts, dataset_rows, datasets, heatmaps, marks, open_app, spec,
                         title, visit)
from gdro_app_synthetic import tree_digest

#: Charts each view draws for a run that logs every standard field (the synthetic "both" run).
EXPECTED_CHARTS = {"traveling_wave": 6, "lead_lag": 2, "rollout_budget": 4, "se_proxy": 2, "outcomes": 4}


@pytest.mark.parametrize("page", PAGES)
def test_each_view_renders_the_tiny_run(page: str, tiny_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, tiny_run.parent, [tiny_run]), page)
    assert_clean(app)
    assert app.title, "every view has a title"
    if page == "config":
        assert app.json, "the config view shows config.json"
    elif page == "compare":
        assert app.multiselect(key="compare-runs").value == ["tiny"]
        assert app.info, "a single run asks for a second one"
    else:
        assert charts(app), f"{page} drew no chart"


@pytest.mark.parametrize("page, expected", EXPECTED_CHARTS.items())
def test_views_draw_every_panel_for_a_complete_run(page: str, expected: int, synthetic_run: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, synthetic_run.parent), page)
    assert_clean(app)
    assert len(charts(app)) == expected
    assert not app.info, [element.value for element in app.info]


def test_traveling_wave_has_three_full_heatmaps_and_snapshot_bars(synthetic_run: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, synthetic_run.parent)
    maps = heatmaps(app)
    assert [title(chart).split(" [")[0] for chart in maps] == [
        "Prompt share q̂(b)", "Prompt-GDRO weight q(b)", "Realized reward"]
    for chart in maps:
        assert 30 * 6 in dataset_rows(chart), "one cell per step and bin"
    bars = [chart for chart in charts(app) if "bar" in marks(chart)]
    assert len(bars) == 3
    assert all(5 * 6 in dataset_rows(chart) for chart in bars), "4 snapshots (the last is the chosen step) + tail"
    assert app.slider(key="Traveling wave-0-step").value == 29


def test_moving_the_step_slider_moves_the_marked_step(synthetic_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, synthetic_run.parent)
    app.slider(key="Traveling wave-0-step").set_value(7).run()
    assert_clean(app)
    bars = [chart for chart in charts(app) if "bar" in marks(chart)]
    assert bars and all(6 * 6 in dataset_rows(chart) for chart in bars), "the chosen step joins the snapshots"
    rules = [layer for chart in heatmaps(app) for layer in spec(chart)["layer"]
             if layer.get("mark", {}).get("type") == "rule"]
    assert len(rules) == 3, "each heatmap marks the chosen step"
    marked = [table.column("step").to_pylist() for chart in heatmaps(app) for table in datasets(chart)
              if table.num_rows == 1]
    assert marked == [[7.0]] * 3


def test_baseline_is_shown_side_by_side(runs_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, runs_root)
    labels = app.selectbox(key="run").options
    assert labels == ["study/grpo", "study/prompt_gdro", "study/rollout_gdro"]
    app.selectbox(key="run").select("study/prompt_gdro")
    app.selectbox(key="baseline").select("study/grpo").run()
    assert_clean(app)
    assert [element.value for element in app.subheader] == ["Run: study/prompt_gdro", "Baseline: study/grpo"]
    assert len(heatmaps(app)) == 6


def test_grpo_run_says_what_it_does_not_log(runs_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, runs_root)
    app = visit(app, "rollout_budget")
    assert_clean(app)
    infos = " ".join(element.value for element in app.info)
    assert "shadow price" in infos, "a GRPO run has no mu"
    assert any("Mean budget held" in element.value for element in app.success)


def test_compare_overlays_three_runs_of_a_study(runs_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, runs_root), "compare")
    assert_clean(app)
    assert app.multiselect(key="compare-runs").value == ["study/grpo", "study/prompt_gdro", "study/rollout_gdro"]
    line_charts = [chart for chart in charts(app) if "line" in marks(chart)]
    titles = [title(chart) for chart in line_charts]
    assert sorted(titles) == ["Evaluation: accuracy", "lead_lag_gap", "mean_success", "se_reduction_pct",
                              "worst_bin_success"]
    mean_success = next(chart for chart in line_charts if title(chart) == "mean_success")
    assert 3 * 40 in dataset_rows(mean_success), "one line per run"
    assert len(app.dataframe) == 1
    assert len(app.dataframe[0].value) == 3
    app.multiselect(key="compare-metrics").select("mu").run()
    assert_clean(app)
    mu = next(chart for chart in charts(app) if title(chart) == "mu")
    assert 40 in dataset_rows(mu), "only the Rollout-GDRO run logs mu"
    raw = next(table for table in datasets(mu) if table.num_rows == 40).column("value").to_pylist()
    app.number_input(key="compare-smoothing").set_value(5).run()
    assert_clean(app)
    mu = next(chart for chart in charts(app) if title(chart) == "mu")
    smoothed = next(table for table in datasets(mu) if table.num_rows == 40).column("value").to_pylist()
    assert smoothed[10] == pytest.approx(sum(raw[6:11]) / 5)


def test_config_view_shows_the_resolved_config(synthetic_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, synthetic_run.parent), "config")
    assert_clean(app)
    assert '"n_bar": 4' in app.json[0].value
    assert "snapshot steps" in list(app.dataframe[0].value["field"])


def test_live_run_grows_between_reruns(live_run: tuple[Path, Callable[[int], None]],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    path, append = live_run
    app = open_app(monkeypatch, path.parent)
    assert_clean(app)
    assert app.toggle(key="live").value is True, "a running run turns live refresh on"
    assert any("10 steps" in element.value for element in app.caption)
    append(5)
    app.run()
    assert_clean(app)
    assert any("15 steps" in element.value for element in app.caption), "the cache follows the files"


def test_torn_last_line_is_ignored_and_said(torn_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for page in ("traveling_wave", "outcomes"):
        app = visit(open_app(monkeypatch, torn_run.parent), page)
        assert_clean(app)
        assert any("still being written" in element.value for element in app.caption)
        assert charts(app)


def test_viewing_writes_nothing_into_run_directories(runs_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = tree_digest(runs_root)
    app = open_app(monkeypatch, runs_root)
    for page in PAGES:
        visit(app, page)
        assert_clean(app)
    assert tree_digest(runs_root) == before


def test_outcomes_plot_pass_at_k_and_accuracy_and_more_on_request(synthetic_run: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, synthetic_run.parent), "outcomes")
    titles = [title(chart) for chart in charts(app)]
    assert titles == ["Training success: mean and worst group", "Effective support (of 6 bins)",
                      "Evaluation pass@k", "Evaluation accuracy"]
    more = app.multiselect(key="Outcomes-0-eval-more")
    assert more.options == ["rollouts_total"] and more.value == []
    more.select("rollouts_total").run()
    assert_clean(app)
    assert title(charts(app)[-1]) == "Evaluation: other metrics"
    latest = app.dataframe[0].value
    assert set(latest["metric"]) == {"accuracy", "worst_group_accuracy", "pass@1", "pass@8", "rollouts_total"}
