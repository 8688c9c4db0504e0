"""The app's pages under AppTest: URL state, run and baseline as one linked view, tooltips and labels,
colours, units and captions, CSV export, the wall-clock axis, trainer runs, grouping."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from app_helpers import (all_views, assert_clean, charts, download_buttons, find_view, heatmaps, markdown_tables,
                         open_app, series_layer, spec, view_table, view_titles, visit)

from apps.data import identity, loading
from apps.views import uicharts

PAIR = {"run": "study/prompt_gdro", "baseline": "study/grpo"}


def _layers(view: dict[str, Any]) -> list[dict[str, Any]]:
    return list(view.get("layer", []))


def _mark(layer: dict[str, Any]) -> str:
    mark = layer.get("mark", {})
    return mark if isinstance(mark, str) else str(mark.get("type", ""))


def _walk(part: Any) -> list[dict[str, Any]]:
    """Every dict inside a spec (to look for legends anywhere)."""
    found = []
    if isinstance(part, dict):
        found.append(part)
        for value in part.values():
            found += _walk(value)
    elif isinstance(part, list):
        for value in part:
            found += _walk(value)
    return found


# ----------------------------------------------------------------------------- URL state

def test_unknown_run_in_the_url_says_so_and_shows_no_other_run(runs_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, runs_root, query={"run": "study/nope"}, view=None)
    assert any("No run is labelled **study/nope**" in element.value for element in app.warning)
    app = visit(app, "lead_lag")
    assert_clean(app)
    assert app.selectbox(key="run").value is None
    assert not [element.value for element in app.subheader], "no other run is shown in its place"
    assert charts(app) == []
    assert any("No run chosen" in element.value for element in app.info)


def test_unknown_baseline_in_the_url_says_so(runs_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, runs_root, query={"run": "study/grpo", "baseline": "nope"}, view=None)
    assert any("**nope**" in element.value and "baseline" in element.value for element in app.warning)
    app = visit(app, "lead_lag")
    assert_clean(app)
    assert [element.value for element in app.subheader] == ["Run: study: grpo · seed 0"]


def test_the_url_sets_the_view(lr_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    query = {"run": "prompt_gdro/lr2/seed1", "baseline": "grpo/lr0.5/seed0", "group": ["method", "lr_scale"],
             "ema": "0.5", "log_y": "true", "x": "wall clock", "run-step": "7"}
    app = open_app(monkeypatch, lr_root, query=query)
    assert_clean(app)
    assert app.selectbox(key="run").value == "prompt_gdro/lr2/seed1"
    assert app.selectbox(key="baseline").value == "grpo/lr0.5/seed0"
    assert app.multiselect(key="group").value == ["method", "lr_scale"]
    assert app.slider(key="ema").value == 0.5 and app.toggle(key="log_y").value is True
    assert app.selectbox(key="x").value == "wall clock"
    assert app.slider(key="run-step").value == 7
    assert [element.value for element in app.subheader] == ["Run: prompt_gdro lr×2 · seed 1",
                                                            "Baseline: grpo lr×0.5 · seed 0"]


def test_view_options_are_bound_to_the_url(lr_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every option of the view is kept in the URL: Streamlit's binding for plain widgets (the
    proto names the parameter), the app's own for the run pickers (the URL keeps the folder label,
    the picker shows the name)."""
    app = visit(open_app(monkeypatch, lr_root), "lead_lag")
    bound = {element.proto.query_param_key for element in [*app.slider, *app.toggle, *app.multiselect,
                                                            *app.selectbox] if element.proto.query_param_key}
    assert {"group", "ema", "log_y", "x"} <= bound
    assert not app.selectbox(key="run").proto.query_param_key, "written by hand: the raw label, not the name"
    app.selectbox(key="run").select("prompt_gdro/lr0.5/seed1").run()
    assert app.query_params["run"] == "prompt_gdro/lr0.5/seed1"
    assert app.selectbox(key="run").value == "prompt_gdro/lr0.5/seed1"
    app = visit(app, "traveling_wave")
    assert app.query_params["run"] == "prompt_gdro/lr0.5/seed1", "kept while navigating"
    assert app.slider(key="run-step").proto.query_param_key == "run-step"
    study = visit(app, "study")
    study.multiselect(key="study-runs").set_value(["grpo/lr0.5/seed0", "grpo/lr0.5/seed1"]).run()
    assert study.query_params["study-runs"] == ["grpo/lr0.5/seed0", "grpo/lr0.5/seed1"]
    back = visit(study, "lead_lag")
    assert "study-runs" not in back.query_params, "a page's own parameters leave with it"


def _holders(block: Any, key: str, path: tuple[str, ...] = ()) -> tuple[str, ...] | None:
    """The blocks (type, direction) that hold the widget ``key``, from the page's main block down."""
    for child in block.children.values():
        if getattr(child, "key", None) == key:
            return path
        if not hasattr(child, "children"):
            continue
        layout = child.proto.flex_container.direction if child.type == "flex_container" else ""
        found = _holders(child, key, (*path, f"{child.type} {layout}"))
        if found is not None:
            return found
    return None


@pytest.mark.parametrize("page, keys", [("traveling_wave", ["run-step", "run-snapshots"]),
                                        ("rollout_budget", ["run-step", "run-frontier"]),
                                        ("outcomes", ["run-eval-more"]), ("evaluations", ["run-groups"])])
def test_a_baseline_leaves_the_runs_widgets_where_they_are(page: str, keys: list[str], trainer_root: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Picking a baseline must not move the run's widgets into other blocks: the browser would mount
    them anew, and a widget mounted anew under the same key stops writing its value into the URL
    (Streamlit 1.67's frontend; the chart still follows it). Checked in Chromium by the browser tests."""
    app = visit(open_app(monkeypatch, trainer_root, query={"run": "prompt_gdro-tiny-s0"}), page)
    alone = {key: _holders(app.main, key) for key in keys}
    assert None not in alone.values(), alone
    app.selectbox(key="baseline").select("grpo-tiny-s0").run()
    assert_clean(app)
    assert [element.value for element in app.subheader][-1] == "Baseline: grpo · seed 0"
    assert {key: _holders(app.main, key) for key in keys} == alone


# ----------------------------------------------------------------------------- grouping and names

def test_group_by_any_config_key(lr_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, lr_root), "study")
    assert_clean(app)
    _, view = find_view(app, "mean_success")
    assert set(view_table(*find_view(app, "mean_success")).column("method").to_pylist()) == {
        "grpo lr×0.5", "grpo lr×2", "prompt_gdro lr×0.5", "prompt_gdro lr×2"}, "automatic: method and lr_scale"
    app.multiselect(key="group").set_value(["lr_scale"]).run()
    assert_clean(app)
    chart, view = find_view(app, "mean_success")
    assert set(view_table(chart, view).column("method").to_pylist()) == {"lr×0.5", "lr×2"}
    assert list(app.dataframe[0].value["seeds"]) == [4, 4], "both methods' seeds in each group"
    colours = series_layer(view)["encoding"]["color"]["scale"]
    assert len(set(colours["range"])) == 2


def test_trainer_runs_show_method_and_seed(trainer_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, trainer_root, view=None)
    assert_clean(app)
    header, *rows = markdown_tables(app)[0]
    cells = {row[0]: dict(zip(header, row)) for row in rows}
    assert cells["prompt_gdro-tiny-s1"]["method"] == "prompt_gdro" and cells["prompt_gdro-tiny-s1"]["seed"] == "1"
    assert cells["grpo-tiny-s0"]["name"] == "grpo · seed 0"
    study = visit(app, "study")
    assert "**grpo**: 2 seeds · **prompt_gdro**: 2 seeds" in [element.value for element in study.caption], \
        "grouped by method, not by folder"


def test_study_bands_are_clipped_to_the_metrics_range(seeds_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, seeds_root), "study")
    table = view_table(*find_view(app, "worst_bin_success")).to_pandas()
    assert (table["lo"].dropna() >= 0).all() and (table["hi"].dropna() <= 1).all()
    _, view = find_view(app, "worst_bin_success")
    low, high = series_layer(view)["encoding"]["y"]["scale"]["domain"]
    assert 0 <= low and high <= 1


# ----------------------------------------------------------------------------- run and baseline: one view

@pytest.mark.parametrize("page, titles", [
    ("lead_lag", ["Lead-lag gap Δμ(t)", "Mean bin index under weights and under data"]),
    ("se_proxy", ["Weighted SE proxy WSE(t)", "Reduction against uniform n̄"]),
    ("outcomes", ["Training success: mean and worst group", "Effective support (of 6 bins)", "Evaluation pass@k",
                  "Evaluation accuracy"])])
def test_run_and_baseline_are_one_linked_view_with_shared_y(page: str, titles: list[str], runs_root: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, runs_root, query=PAIR), page)
    assert_clean(app)
    linked = [chart for chart in charts(app) if "vconcat" in spec(chart) or "hconcat" in spec(chart)]
    assert len(linked) == 1, "the time series of both columns are one Vega view"
    rows = spec(linked[0]).get("vconcat", [spec(linked[0])])
    assert [[view["title"] if isinstance(view["title"], str) else view["title"]["text"] for view in row["hconcat"]]
            for row in rows] == [[title, title] for title in titles], "a row per chart, a column per run"
    params = {param["name"]: param for param in spec(linked[0])["params"]}
    zoomed = set(params["xzoom"]["views"])
    for row in rows:
        left, right = row["hconcat"]
        assert {layer.get("name") for layer in _layers(left)} & zoomed, "the run's charts zoom..."
        assert {layer.get("name") for layer in _layers(right)} & zoomed, "...with the baseline's"
        domains = [series_layer(view)["encoding"]["y"]["scale"].get("domain") for view in (left, right)]
        assert domains[0] is not None and domains[0] == domains[1], "one y-range per row"


def test_effective_support_and_success_have_sensible_axes(synthetic_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, synthetic_run.parent), "outcomes")
    _, view = find_view(app, "Effective support (of 6 bins)")
    low, high = series_layer(view)["encoding"]["y"]["scale"]["domain"]
    assert 1.0 <= low and high <= 6.0 and high - low >= 0.5, "within [1, G], at least a tenth of it"
    _, view = find_view(app, "Training success: mean and worst group")
    low, high = series_layer(view)["encoding"]["y"]["scale"]["domain"]
    assert 0.0 <= low and high <= 1.0


# ----------------------------------------------------------------------------- tooltip, labels, legends, colours

def test_tooltip_lists_every_series_and_labels_do_not_overprint(synthetic_run: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, synthetic_run.parent), "se_proxy")
    chart, view = find_view(app, "Weighted SE proxy WSE(t)")
    names = set(view_table(chart, view).column("series").to_pylist())
    targets = [layer for layer in _layers(view) if str(layer.get("name", "")).startswith("hover")]
    assert len(targets) == 1
    titles = {item["title"] for item in targets[0]["encoding"]["tooltip"]}
    assert titles == {"step", *names}, "hovering anywhere (the targets' Voronoi cells) shows every series' value"
    texts = [layer for layer in _layers(view) if _mark(layer) == "text"]
    assert len(texts) == 2 and {layer["mark"]["align"] for layer in texts} == {"left", "right"}
    for layer in texts:
        assert layer["encoding"]["y"]["field"] == "label_y" and layer["encoding"]["y"]["scale"] is None, \
            "one label row per series at the top of the chart, not at the series' own height"
        calculate = [step["calculate"] for step in layer["transform"] if "calculate" in step]
        assert any("label_row" in text for text in calculate)


def test_series_legends_sit_below_their_plots_and_cut_long_names_in_the_middle(
        runs_root: Path, real_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every legend of a time-series chart is under its plot (the plot keeps its width), cuts a long
    name in its middle and shows the full name on hover; the other legends (heatmap colour bars,
    bars) never cut a label. The layout in a browser: test_app_browser_layout.py."""
    for root, page in ((runs_root, "outcomes"), (runs_root, "traveling_wave"), (real_run.parent, "evaluations")):
        app = visit(open_app(monkeypatch, root), page)
        legends = [part["legend"] for chart in charts(app) for part in _walk(spec(chart))
                   if isinstance(part.get("legend"), dict)]
        series = [legend for legend in legends if "labelExpr" in legend]
        assert (len(series) > 0) == (page != "traveling_wave"), page  # its charts: heatmaps and bars
        assert all(legend["orient"] == "bottom" and "'center'" in legend["labelExpr"]
                   and "tooltip" in legend["encoding"]["labels"] for legend in series), page
        assert legends and all(legend.get("labelLimit") == 0 for legend in legends if legend not in series), page


def _distance(first: str, second: str) -> float:
    rgb = [np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)], dtype=float) for colour in (first, second)]
    return float(np.linalg.norm(rgb[0] - rgb[1]))


def test_paired_series_get_clearly_distinct_colours(synthetic_run: Path, real_run: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    for root, page, title, pair in (
            (synthetic_run.parent, "se_proxy", "Weighted SE proxy WSE(t)", ("actual", "square-root optimum")),
            (real_run.parent, "evaluations", "mean@8 per benchmark (95% interval)", ("pooled", "worst group"))):
        app = visit(open_app(monkeypatch, root), page)
        _, view = find_view(app, title)
        scale = series_layer(view)["encoding"]["color"]["scale"]
        colours = dict(zip(scale["domain"], scale["range"]))
        assert len(set(colours.values())) == len(colours)
        assert _distance(colours[pair[0]], colours[pair[1]]) > 150, (pair, colours)


# ----------------------------------------------------------------------------- units and captions

def test_controllers_share_is_a_fraction_not_seconds(real_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, real_run.parent), "step_time")
    assert_clean(app)
    chart, view = find_view(app, "Seconds per step by phase (stacked)")
    phases = set(view_table(chart, view).column("series").to_pylist())
    assert "controllers" in phases and not any("share" in phase for phase in phases)
    assert not any("share" in phase for phase in app.dataframe[0].value["phase"])
    run = loading.load_run(real_run)
    share = float(np.nanmean(run.scalars["time/controllers_share"]))
    assert any(f"`time/controllers_share` {100 * share:.2f}%" in element.value for element in app.caption)


def test_se_caption_attributes_nothing_it_does_not_know(synthetic_run: Path, tmp_path: Path, runs_root: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    grpo = tmp_path / "joint"
    shutil.copytree(runs_root / "study" / "grpo", grpo)  # uniform allocation: actual = uniform at every step
    config = json.loads((grpo / "config.json").read_text())
    (grpo / "config.json").write_text(json.dumps({**config, "resolved": {"allocator": "gdro"}}))
    app = visit(open_app(monkeypatch, tmp_path), "se_proxy")
    captions = " ".join(element.value for element in app.caption)
    assert "equals the uniform budget at every step (its config names the allocator `gdro`)" in captions
    assert "no Rollout-GDRO" not in captions


def test_warm_up_is_not_called_missing_data(warmup_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for page, what in (("lead_lag", "No lead-lag gap yet"), ("traveling_wave", "No `share` per bin yet")):
        app = visit(open_app(monkeypatch, warmup_run.parent), page)
        assert_clean(app)
        infos = " ".join(element.value for element in app.info)
        assert what in infos and "6 steps logged so far" in infos, infos
        assert "does not log the per-bin `share`" not in infos


def test_interval_bounds_are_bands_not_series(real_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, real_run.parent), "outcomes")
    assert_clean(app)
    chart, view = find_view(app, "Evaluation pass@k")
    table = view_table(chart, view).to_pandas()
    assert not table["series"].str.endswith(("_lo", "_hi")).any()
    assert table["lo"].notna().all() and (table["lo"] <= table["value"]).all() and (table["value"] <= table["hi"]).all()
    assert "area" in {_mark(layer) for layer in view["layer"]}
    compare = visit(app, "compare")
    options = compare.selectbox(key="compare-eval-metric").options
    assert options and not any(name.endswith(("_lo", "_hi")) for name in options)


# ----------------------------------------------------------------------------- CSV export

@pytest.mark.parametrize("page", ["traveling_wave", "lead_lag", "rollout_budget", "se_proxy", "outcomes", "study",
                                  "compare"])
def test_every_chart_page_offers_its_data_as_csv(page: str, runs_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, runs_root, query=PAIR), page)
    buttons = download_buttons(app)
    assert buttons and all(button.label == "Chart data (CSV)" for button in buttons)
    assert len(buttons) >= len(charts(app)), "a button per chart element"


def test_csv_holds_every_chart_and_row() -> None:
    first = pd.DataFrame({"step": [0, 1, 2], "series": "a", "value": [0.1, 0.2, 0.3]})
    second = pd.DataFrame({"step": [0, 1], "series": "b", "value": [1.0, 2.0], "lo": [0.5, 1.5], "hi": [1.5, 2.5]})
    table = pd.read_csv(io.BytesIO(uicharts.csv_bytes({"first": first, "second": second})))
    assert list(table.columns) == ["chart", "step", "series", "value", "lo", "hi"]
    assert table["chart"].tolist() == ["first"] * 3 + ["second"] * 2
    assert table["value"].tolist() == [0.1, 0.2, 0.3, 1.0, 2.0]
    assert table["lo"].isna().tolist() == [True] * 3 + [False] * 2


# ----------------------------------------------------------------------------- wall clock

def test_wall_clock_axis(real_run: Path, synthetic_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, real_run.parent, query={"x": "wall clock"}), "outcomes")
    assert_clean(app)
    chart, view = find_view(app, "Training success: mean and worst group")
    assert series_layer(view)["encoding"]["x"]["title"] == "wall clock (min)", "a 7-minute run in minutes"
    run = loading.load_run(real_run)
    seconds = np.cumsum(np.nan_to_num(run.scalars["time/step"]) + np.nan_to_num(run.scalars.get("time/eval", 0.0)))
    table = view_table(chart, view).to_pandas()
    mean = table[table["series"] == "mean over prompts"]
    assert mean["step"].to_numpy() == pytest.approx(seconds / 60), "minutes since the start at each logged step"
    plain = visit(open_app(monkeypatch, synthetic_run.parent, query={"x": "wall clock"}), "outcomes")
    assert any("logs no step times" in element.value for element in plain.caption)
    _, view = find_view(plain, "Training success: mean and worst group")
    assert series_layer(view)["encoding"]["x"]["title"] == "step"


def test_every_chart_of_evaluations_follows_the_wall_clock(real_run: Path, trainer_root: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-group charts below the linked view too: the run's elapsed time at each evaluation, in
    the top charts' unit and on their range (shared with the baseline's)."""
    app = visit(open_app(monkeypatch, real_run.parent, query={"x": "wall clock", "run-groups": "algebra"}),
                "evaluations")
    assert_clean(app)
    run = loading.load_run(real_run)
    seconds = np.cumsum(np.nan_to_num(run.scalars["time/step"]) + np.nan_to_num(run.scalars.get("time/eval", 0.0)))
    records = [json.loads(line) for line in (real_run / "eval.jsonl").read_text().splitlines() if line.strip()]
    logged = [record["step"] for record in records if "group/algebra/mean@8" in record["metrics"]]
    _, top = find_view(app, "mean@8 per benchmark (95% interval)")
    chart, view = find_view(app, "mean@8 per group")
    x_axis = series_layer(view)["encoding"]["x"]
    assert x_axis["title"] == series_layer(top)["encoding"]["x"]["title"] == "wall clock (min)"
    assert x_axis["scale"]["domain"] == series_layer(top)["encoding"]["x"]["scale"]["domain"]
    assert view_table(chart, view).to_pandas()["step"].to_numpy() == pytest.approx(
        np.interp(logged, run.steps, seconds) / 60), "minutes since the start at each evaluation"
    pair = visit(open_app(monkeypatch, trainer_root, query={"x": "wall clock", "run": "grpo-tiny-s0",
                                                              "baseline": "prompt_gdro-tiny-s1"}), "evaluations")
    for key in ("run-groups", "baseline-groups"):
        pair.multiselect(key=key).set_value(["algebra"]).run()
    domains = {json.dumps(series_layer(view)["encoding"]["x"]["scale"]["domain"]) for _, view in all_views(pair)}
    titles = {series_layer(view)["encoding"]["x"]["title"] for _, view in all_views(pair)}
    assert len(domains) == 1 and titles == {"wall clock (min)"}, (domains, titles)
    assert view_titles(pair).count("mean@8 per group") == 2


def test_heatmaps_of_both_runs_are_one_element(runs_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, runs_root, query=PAIR)
    assert len(heatmaps(app)) == 6
    assert len([chart for chart in charts(app) if "hconcat" in spec(chart)]) == 1
    assert identity.method_of({"method": {"name": "x"}}) == "x"
    assert len(all_views(app)) >= 6 and view_titles(app)


def test_run_and_baseline_bars_share_their_value_axis(runs_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for page in ("traveling_wave", "rollout_budget"):
        app = visit(open_app(monkeypatch, runs_root, query=PAIR), page)
        bars = [spec(chart) for chart in charts(app) if spec(chart).get("mark", {}).get("type") == "bar"]
        assert len(bars) == 2, page
        domains = [chart["encoding"]["y"]["scale"].get("domain") for chart in bars]
        assert domains[0] is not None and domains[0] == domains[1], (page, domains)
