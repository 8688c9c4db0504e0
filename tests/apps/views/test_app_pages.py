"""Every view of the app, run with streamlit.testing's AppTest against tiny and synthetic runs."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest
from app_helpers import (PAGES, all_views, assert_clean, charts, dataset_rows, find_view, heatmap_views,
                         heatmaps, marks, open_app, run_labels, spec, title, view_datasets, view_table, view_title,
                         view_titles, visit)
from gdro_app_synthetic import tree_digest

#: Charts each view draws for a run that logs every standard field (the synthetic "both" run);
#: time-series charts of a page are counted one by one inside their linked view.
EXPECTED_CHARTS = {"traveling_wave": 4, "lead_lag": 2, "rollout_budget": 4, "se_proxy": 2, "outcomes": 4}


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
    assert len(all_views(app)) == expected, view_titles(app)
    assert not app.info, [element.value for element in app.info]


def test_traveling_wave_has_three_full_heatmaps_and_snapshot_bars(synthetic_run: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, synthetic_run.parent)
    maps = heatmap_views(app)
    assert len({id(chart) for chart, _ in maps}) == 1, "a run's heatmaps are stacked in one chart element"
    assert [view_title(view).split(" [")[0] for _, view in maps] == [
        "Prompt share q̂(b)", "Prompt-GDRO weight q(b)", "Realized reward"]
    for chart, view in maps:
        cells = [layer for layer in view["layer"] if layer["mark"]["type"] == "rect"]
        rows = sum(view_table(chart, layer).num_rows for layer in cells)
        assert rows == 30 * 6, "one cell per step and bin (valued and null cells in separate layers)"
    bars = [chart for chart in charts(app) if "bar" in marks(chart)]
    assert len(bars) == 1, "the snapshot bars of the chosen field only"
    assert 5 * 6 in dataset_rows(bars[0]), "4 snapshots (the last is the chosen step) + tail"
    assert title(bars[0]) == "Prompt share q̂(b): snapshots and tail average"
    assert app.slider(key="run-step").value == 29
    app.radio(key="run-snapshots").set_value("Realized reward").run()
    assert_clean(app)
    bars = [chart for chart in charts(app) if "bar" in marks(chart)]
    assert [title(chart) for chart in bars] == ["Realized reward: snapshots and tail average"]
    assert spec(bars[0])["encoding"]["y"]["title"] == "reward"


def test_moving_the_step_slider_moves_the_marked_step(synthetic_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, synthetic_run.parent)
    app.slider(key="run-step").set_value(7).run()
    assert_clean(app)
    bars = [chart for chart in charts(app) if "bar" in marks(chart)]
    assert bars and all(6 * 6 in dataset_rows(chart) for chart in bars), "the chosen step joins the snapshots"
    rules = [layer for view in heatmaps(app) for layer in view["layer"]
             if layer.get("mark", {}).get("type") == "rule"]
    assert len(rules) == 3, "each heatmap marks the chosen step"
    marked = [table.column("step").to_pylist() for chart, view in heatmap_views(app)
              for table in view_datasets(chart, view) if table.num_rows == 1]
    assert marked == [[7.0]] * 3


def test_baseline_is_shown_side_by_side(runs_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, runs_root)
    assert run_labels(app) == ["study/grpo", "study/prompt_gdro", "study/rollout_gdro"]
    app.selectbox(key="run").select("study/prompt_gdro")
    app.selectbox(key="baseline").select("study/grpo").run()
    assert_clean(app)
    assert [element.value for element in app.subheader] == ["Run: study: prompt_gdro · seed 1",
                                                            "Baseline: study: grpo · seed 0"]
    assert "folder `study/prompt_gdro`" in [element.value for element in app.caption]
    assert len(heatmaps(app)) == 6
    assert len({id(chart) for chart, _ in heatmap_views(app)}) == 1, "both runs' heatmaps in one element"


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
    assert sorted(view_titles(app)) == ["Evaluation: accuracy", "lead_lag_gap", "mean_success", "se_reduction_pct",
                                        "worst_bin_success"]
    chart, view = find_view(app, "mean_success")
    assert view_table(chart, view).num_rows == 3 * 40, "one line per run"
    assert len(app.dataframe) == 1
    assert len(app.dataframe[0].value) == 3
    app.multiselect(key="compare-metrics").select("mu").run()
    assert_clean(app)
    chart, view = find_view(app, "mu")
    table = view_table(chart, view)
    assert table.num_rows == 40, "only the Rollout-GDRO run logs mu"
    raw = table.column("value").to_pylist()
    app.slider(key="ema").set_value(0.6).run()
    assert_clean(app)
    chart, view = find_view(app, "mu")
    smoothed = view_table(chart, view)
    assert smoothed.column("raw").to_pylist() == pytest.approx(raw), "the raw series stays, drawn faint"
    expected, state = [], 0.0
    for t, value in enumerate(raw, start=1):  # TensorBoard's debiased EMA by hand
        state = 0.6 * state + 0.4 * value
        expected.append(state / (1 - 0.6 ** t))
    assert smoothed.column("value").to_pylist() == pytest.approx(expected)
    opacities = [layer["encoding"]["opacity"]["condition"]["value"] for layer in view["layer"]
                 if layer["mark"]["type"] == "line" and "opacity" in layer["encoding"]]
    assert 0.25 in opacities, "raw lines are faint"


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


def test_torn_last_line_of_a_finished_run_is_called_damaged(torn_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for page in ("traveling_wave", "outcomes"):
        # a damaged run is never shown by default: it is asked for
        app = visit(open_app(monkeypatch, torn_run.parent, query={"run": "torn"}), page)
        assert_clean(app)
        captions = " ".join(element.value for element in app.caption)
        assert "still being written" not in captions, "the run is finished: nothing is being written"
        assert "last line of steps.jsonl is cut short and was ignored" in captions
        assert "finished, so the file was damaged" in captions
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
    assert view_titles(app) == ["Training success: mean and worst group", "Effective support (of 6 bins)",
                                "Evaluation pass@k", "Evaluation accuracy"]
    more = app.multiselect(key="run-eval-more")
    assert more.options == ["rollouts_total"] and more.value == []
    more.select("rollouts_total").run()
    assert_clean(app)
    assert "Evaluation: rollouts_total" in view_titles(app)
    latest = app.dataframe[0].value
    assert set(latest["metric"]) == {"accuracy", "worst_group_accuracy", "pass@1", "pass@8", "rollouts_total"}
