"""The study, evaluations, step-time and run-table views under AppTest, and what they share: config
diff, null shares, bin labels, shared colour scales, equal y-ranges, GRPO's gap, the SE lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from app_helpers import (all_views, assert_clean, charts, find_view, heatmaps, markdown_tables, open_app,
                         series_layer, spec, view_table, view_titles, visit)

from apps.data import loading, runtable, study
from apps.data.colours import METHOD_COLOURS


def _layer_marks(view: dict[str, Any]) -> list[str]:
    return [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in view["layer"]]


def test_study_view_draws_bands_per_method_and_final_intervals(seeds_root: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, seeds_root), "study")
    assert_clean(app)
    assert len(charts(app)) == 1, "all metrics in one linked view"
    assert view_titles(app) == ["mean_success", "worst_bin_success", "lead_lag_gap", "se_reduction_pct"]
    chart, view = find_view(app, "mean_success")
    assert "area" in _layer_marks(view), "a shaded band"
    table = view_table(chart, view).to_pandas()
    assert set(table["method"]) == {"grpo", "prompt_gdro"}
    assert len(table) == 2 * 30, "one mean per method and step, not one line per seed"
    assert (table["lo"] < table["value"]).all() and (table["value"] < table["hi"]).all()
    final = app.dataframe[0].value
    assert list(final["method"]) == ["grpo", "prompt_gdro"] and list(final["seeds"]) == [3, 3]
    assert {"worst_bin_success", "worst_group_accuracy"} <= set(final.columns)
    assert all("[" in cell for cell in final["mean_success"])
    assert "grpo**: 3 seeds" in " ".join(element.value for element in app.caption)


def test_compare_groups_seeds_by_method(seeds_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, seeds_root), "compare")
    app.multiselect(key="compare-runs").set_value([f"{m}/seed{s}" for m in ("grpo", "prompt_gdro")
                                                   for s in range(3)]).run()
    app.toggle(key="compare-group").set_value(True).run()
    assert_clean(app)
    chart, view = find_view(app, "mean_success")
    assert set(view_table(chart, view).column("method").to_pylist()) == {"grpo", "prompt_gdro"}
    assert "area" in _layer_marks(view)
    assert list(app.dataframe[0].value["seeds"]) == [3, 3]


def test_every_time_series_chart_is_linked_with_crosshair(seeds_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, seeds_root), "study")
    chart_spec = spec(charts(app)[0])
    params = {param["name"]: param for param in chart_spec["params"]}
    assert params["xzoom"]["bind"] == "scales" and params["xzoom"]["select"]["encodings"] == ["x"]
    assert params["crosshair"]["select"]["fields"] == ["step"] and params["crosshair"]["select"]["nearest"]
    named = [layer.get("name") for _, view in all_views(app) for layer in view["layer"]]
    assert set(params["xzoom"]["views"]) <= set(named) and len(params["xzoom"]["views"]) == 4, "one per chart"
    for _, view in all_views(app):
        rule = next(layer for layer in view["layer"] if layer["mark"]["type"] == "rule" and "tooltip" in
                    layer["encoding"])
        assert {item["title"] for item in rule["encoding"]["tooltip"]} == {"step", "grpo", "prompt_gdro"}


def test_log_scale_toggle(seeds_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, seeds_root), "study")
    app.toggle(key="log_y").set_value(True).run()
    assert_clean(app)
    _, view = find_view(app, "mean_success")
    line = next(layer for layer in view["layer"] if layer.get("name", "").startswith("zoom"))
    assert line["encoding"]["y"]["scale"]["type"] == "log"
    _, view = find_view(app, "lead_lag_gap")
    line = next(layer for layer in view["layer"] if layer.get("name", "").startswith("zoom"))
    assert line["encoding"]["y"]["scale"]["type"] == "symlog", "values at or below 0"


def test_method_colours_do_not_change_with_the_selection(runs_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def colour_of(app: Any, run: str) -> str:
        _, view = find_view(app, "mean_success")
        scale = view["layer"][0]["encoding"]["color"]["scale"]
        return dict(zip(scale["domain"], scale["range"]))[run]

    app = visit(open_app(monkeypatch, runs_root), "compare")
    first = colour_of(app, "study: rollout_gdro · seed 2")
    assert first == METHOD_COLOURS["rollout_gdro"], "one run of its method: the method's own colour"
    app.multiselect(key="compare-runs").set_value(["study/rollout_gdro", "study/prompt_gdro"]).run()
    assert colour_of(app, "study: rollout_gdro · seed 2") == first
    assert colour_of(app, "study: prompt_gdro · seed 1") == METHOD_COLOURS["prompt_gdro"]


def test_evaluations_view_shows_benchmarks_with_intervals(real_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, real_run.parent), "evaluations")
    assert_clean(app)
    assert view_titles(app) == ["mean@8 per benchmark (95% interval)", "pass@8 per benchmark (95% interval)"]
    chart, view = find_view(app, "mean@8 per benchmark (95% interval)")
    assert "area" in _layer_marks(view)
    series = set(view_table(chart, view).column("series").to_pylist())
    assert series == {"aime24", "gsm8k", "math500", "pooled", "worst group", "worst benchmark"}
    table = app.dataframe[0].value
    assert list(table["kind"])[:3] == ["benchmark"] * 3 and "worst_group" in set(table["kind"])
    assert all("[" in cell for cell in table["mean@8"])
    app.multiselect(key="run-groups").set_value(["algebra"]).run()
    assert_clean(app)
    assert "mean@8 per group" in view_titles(app)


def test_step_time_view(real_run: Path, synthetic_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, real_run.parent), "step_time")
    assert_clean(app)
    assert view_titles(app)[0] == "Seconds per step by phase (stacked)"
    assert {"Total step time", "Throughput"} <= set(view_titles(app))
    assert app.dataframe[0].value["phase"].iloc[0] == "generate"
    app = visit(open_app(monkeypatch, synthetic_run.parent), "step_time")
    assert_clean(app)
    assert "step times" in app.info[0].value


def test_run_table_search_and_config_diff(seeds_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, seeds_root), "runs")
    assert_clean(app)
    header, *rows = markdown_tables(app)[0]
    assert len(rows) == 6 and "config.prompt_gdro.enabled" in header
    app.text_input(key="runs-search").input("prompt_gdro seed1").run()
    header, *rows = markdown_tables(app)[0]
    assert [row[header.index("run")] for row in rows] == ["prompt_gdro/seed1"]
    assert any("1 of 6 runs" in element.value for element in app.caption)
    app.selectbox(key="diff-a").select("grpo/seed0")
    app.selectbox(key="diff-b").select("prompt_gdro/seed2").run()
    assert_clean(app)
    header, *rows = markdown_tables(app)[1]
    assert header == ["key", "grpo/seed0", "prompt_gdro/seed2"]
    assert {row[0] for row in rows} == {"method", "seed", "prompt_gdro.enabled"}
    app.selectbox(key="diff-b").select("grpo/seed0").run()
    assert any("two different runs" in element.value for element in app.info)


def test_chart_options_only_on_chart_pages_and_kept_across_pages(runs_root: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, runs_root, view=None)  # the landing run table: no chart, no chart options
    assert_clean(app)
    assert [slider.key for slider in app.slider] == [] and "log_y" not in [toggle.key for toggle in app.toggle]
    app = visit(app, "lead_lag")
    app.slider(key="ema").set_value(0.6)
    app.toggle(key="log_y").set_value(True)
    app.selectbox(key="x").select("wall clock").run()
    app = visit(visit(app, "config"), "lead_lag")
    assert_clean(app)
    assert not app.warning, [element.value for element in app.warning]
    assert app.slider(key="ema").value == 0.6
    assert app.toggle(key="log_y").value is True and app.selectbox(key="x").value == "wall clock"
    assert app.selectbox(key="live_interval").value == 5


def test_run_table_cells_are_escaped_for_markdown() -> None:
    import re

    import pandas as pd

    raw = "a_b **c** [x](y) $z$ :smile: `k` <i> #h | ~s~ \\"
    escaped = runtable.markdown_text(raw)
    assert re.sub(r"\\(.)", r"\1", escaped) == raw, "CommonMark's backslash escapes give the text back"
    assert not re.search(r"(?<!\\)[*_`\[\]$:<>#|~]", escaped.replace("\\\\", "")), "no special left bare"
    frame = pd.DataFrame({"run_a": ["p_g", None, raw], "n": [3, 4, 5], "x": [0.123456, float("nan"), 12345.678],
                          "note": ["two\nlines", "", "ok"]})
    text = runtable.markdown_table(frame)
    lines = text.splitlines()
    assert lines[0] == "| run\\_a | n | x | note |" and lines[1] == "|---|---:|---:|---|", "numbers right-aligned"
    assert lines[2] == "| p\\_g | 3 | 0.1235 | two lines |", "floats to 4 significant digits, no line break"
    assert lines[3] == "|  | 4 |  |  |", "missing values blank"
    assert lines[4] == f"| {escaped} | 5 | 1.235e+04 | ok |"
    assert len(lines) == 5


def test_unassigned_shares_are_null_and_labelled(real_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, real_run.parent)
    assert_clean(app)
    assert any("8 steps with no prompt assigned" in element.value for element in app.caption)
    share = heatmaps(app)[0]
    null_layers = [layer for layer in share["layer"] if layer.get("transform", [{}])[0].get("filter")
                   == "!isValid(datum.value)"]
    assert len(null_layers) == 1, "null cells get their own grey layer with a note"
    assert null_layers[0]["mark"]["color"] == "#d9d9d9"


def test_every_bin_is_labelled(synthetic_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, synthetic_run.parent)
    for view in heatmaps(app):
        axis = view["layer"][0]["encoding"]["y"]["axis"]
        assert axis["values"] == list(range(6)) and axis["labelOverlap"] is False


def test_run_and_baseline_heatmaps_share_colour_scales_auto_or_natural(runs_root: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, runs_root)
    app.selectbox(key="run").select("study/prompt_gdro")
    app.selectbox(key="baseline").select("study/grpo").run()
    assert_clean(app)
    runs = [loading.load_run(runs_root / "study" / name) for name in ("prompt_gdro", "grpo")]
    expected = []
    for field in ("share", "weight", "reward"):
        values = np.concatenate([run.bins[field].reshape(-1) for run in runs])
        expected.append([float(np.nanmin(values)), float(np.nanmax(values))])
    domains = [view["layer"][0]["encoding"]["color"]["scale"].get("domain") for view in heatmaps(app)]
    assert np.allclose(domains, expected * 2), "auto: each field's range over both runs, one scale for both"
    titles = [view["layer"][0]["encoding"]["color"]["title"] for view in heatmaps(app)]
    assert titles[0].startswith("share · auto "), titles
    app.selectbox(key="colours").select("natural range").run()
    assert_clean(app)
    domains = [view["layer"][0]["encoding"]["color"]["scale"].get("domain") for view in heatmaps(app)]
    assert domains == [[0.0, 1.0], [0.0, 1.0], [-1.0, 1.0]] * 2, \
        "natural: share and weight on [0, 1], reward on [-1, 1], for both runs"
    titles = [view["layer"][0]["encoding"]["color"]["title"] for view in heatmaps(app)]
    assert titles[:3] == ["share · natural 0–1", "weight · natural 0–1", "reward · natural -1–1"], titles
    params = {param["name"]: param for param in spec(charts(app)[0])["params"]}
    assert params["stepzoom"]["bind"] == "scales" and len(params["stepzoom"]["views"]) == 6, \
        "one step zoom for the six heatmaps of both columns"


def test_lead_lag_columns_share_y_ranges_and_grpo_gap_is_explained(runs_root: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, runs_root)
    app.selectbox(key="run").select("study/prompt_gdro")
    app.selectbox(key="baseline").select("study/grpo")
    app = visit(app, "lead_lag")
    assert_clean(app)
    domains = [series_layer(view)["encoding"]["y"]["scale"]["domain"] for _, view in all_views(app)
               if view["title"] == "Lead-lag gap Δμ(t)"]
    assert len(domains) == 2 and domains[0] == domains[1]
    infos = [element.value for element in app.info]
    assert len(infos) == 1 and "μ_weight = (B−1)/2 = 2.5" in infos[0], "only the GRPO column explains its gap"


def test_se_uniform_line_is_dashed_and_on_top(synthetic_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = visit(open_app(monkeypatch, synthetic_run.parent), "se_proxy")
    _, view = find_view(app, "Weighted SE proxy WSE(t)")
    lines = [layer for layer in view["layer"] if layer["mark"]["type"] == "line"]
    top = lines[-1]
    assert top["mark"]["strokeDash"] == [6, 4] and top["mark"]["strokeWidth"] == 3
    assert top["transform"][0]["filter"]["oneOf"] == ["uniform n̄ (dashed, on top)"]


def test_a_file_typed_as_runs_folder_is_named_as_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = tmp_path / "runs.txt"
    file.write_text("not a folder")
    app = open_app(monkeypatch, file)
    assert not app.exception
    text = " ".join(element.value for element in [*app.info, *app.sidebar.caption])
    assert "a file, not a folder" in text and "does not exist" not in text


def test_page_icon_is_a_local_file() -> None:
    """The favicon is served by the app (a PNG next to it), not fetched from an icon-font or emoji host;
    the browser test checks that a page load asks no other host."""
    source = (Path(__file__).resolve().parents[3] / "apps" / "streamlit_app.py").read_text()
    assert "page_icon=str(ICON) if ICON.exists()" in source
    icon = Path(__file__).resolve().parents[3] / "apps" / "static" / "icon.png"
    assert icon.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_method_key_drops_seeds_at_any_depth() -> None:
    first = {"method": "a", "seed": 1, "inner": {"seed": 3, "lr": 0.1}, "snapshot_every": 0}
    second = {"method": "a", "seed": 2, "inner": {"seed": 4, "lr": 0.1}, "snapshot_every": -1}
    assert study.method_key(first) == study.method_key(second)
    assert study.method_key(first) != study.method_key({**first, "inner": {"lr": 0.2}})


def test_landing_page_is_the_run_table(seeds_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first page a user sees lists every run and draws no chart (fast first paint)."""
    app = open_app(monkeypatch, seeds_root, view=None)
    assert_clean(app)
    assert len(markdown_tables(app)[0]) == 1 + 6   # the header and one row per run
    assert charts(app) == []


def test_the_study_run_picker_says_where_its_runs_came_from(root100: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """More than 8 runs fold into an expander whose label says why they are shown: the study's
    default, or runs named in the link (not called the default)."""
    app = visit(open_app(monkeypatch, root100.root, view=None), "study")
    assert [element.label for element in app.expander if element.label.startswith("Runs (")] == \
        ["Runs (100: default)"]
    labels = [f"study/runs/prompt_gdro/lr{lr}/seed{seed}" for lr in (1, 2) for seed in range(5)]
    linked = visit(open_app(monkeypatch, root100.root, view=None, query={"study-runs": labels}), "study")
    assert_clean(linked)
    assert [element.label for element in linked.expander if element.label.startswith("Runs (")] == \
        ["Runs (10: chosen here or in the link)"]
