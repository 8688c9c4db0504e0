"""Charts that stay readable at 100 runs: legends beside the plot (summarised by group or method),
click-to-isolate and hover highlight, bands only with 3+ seeds, aggregates, one x-axis per producer,
integer step ticks, wall-clock units, heatmap colour scales (auto or natural, said in the legend)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from apps.data import colours, study
from apps.views import interactive, uicharts
from gdro_lab.runformat.runlog import RunData


def _run(name: str, values: list[float], method: str = "m") -> RunData:
    steps = np.arange(len(values))
    return RunData(Path(name), {"num_bins": 10}, {"method": method, "seed": name}, steps,
                   {"mean_success": np.array(values, dtype=float), "lead_lag_gap": np.array(values) - 0.5}, {})


def _methods(seeds: dict[str, list[float]]) -> list[study.Method]:
    return study.group_by_method({name: _run(name, values) for name, values in seeds.items()})


SEEDS = {"a": [0.1, 0.5, 0.9], "b": [0.3, 0.4, 0.7], "c": [0.2, 0.45, 0.8], "d": [0.25, 0.6, 0.65]}


def test_no_band_for_fewer_than_three_seeds_and_the_page_says_so() -> None:
    two = _methods({"a": SEEDS["a"], "b": SEEDS["b"]})
    frame = study.band_frame(two, "mean_success")
    assert frame["lo"].isna().all() and frame["hi"].isna().all() and frame["value"].notna().all()
    assert "fewer get no band" in study.band_note(two, "mean", "95% CI")
    three = _methods({name: SEEDS[name] for name in "abc"})
    assert study.band_frame(three, "mean_success")["lo"].notna().all()
    assert "fewer" not in study.band_note(three, "mean", "95% CI")


@pytest.mark.parametrize("centre, interval", [("mean", "95% CI"), ("mean", "± 1 SE"), ("mean", "min–max"),
                                              ("median", "min–max"), ("median", "IQR (25–75%)")])
def test_aggregates_match_numpy_and_scipy(centre: str, interval: str) -> None:
    frame = study.band_frame(_methods(SEEDS), "lead_lag_gap", centre, interval)
    values_TS = np.array(list(SEEDS.values())).T - 0.5
    mean, sd = values_TS.mean(axis=1), values_TS.std(axis=1, ddof=1)
    expected_centre = mean if centre == "mean" else np.median(values_TS, axis=1)
    half = {"95% CI": stats.t.ppf(0.975, 3) * sd / 2, "± 1 SE": sd / 2}.get(interval)
    lo, hi = (mean - half, mean + half) if half is not None else {
        "min–max": (values_TS.min(axis=1), values_TS.max(axis=1)),
        "IQR (25–75%)": (np.percentile(values_TS, 25, axis=1), np.percentile(values_TS, 75, axis=1))}[interval]
    assert frame["value"].to_numpy() == pytest.approx(expected_centre)
    assert frame["lo"].to_numpy() == pytest.approx(lo) and frame["hi"].to_numpy() == pytest.approx(hi)


def test_an_interval_that_does_not_go_with_the_centre_is_refused() -> None:
    with pytest.raises(ValueError, match="does not go with the median"):
        study.band_frame(_methods(SEEDS), "mean_success", "median", "95% CI")


def _names(count: int, groups: int, methods: int) -> tuple[list[str], dict[str, str], dict[str, str]]:
    names = [f"run{index}" for index in range(count)]
    return (names, {name: f"group{index % groups}" for index, name in enumerate(names)},
            {name: f"method{index % methods}" for index, name in enumerate(names)})


def test_legends_keep_up_to_20_groups_apart_then_the_top_k_and_others() -> None:
    names, group_of, method_of = _names(interactive.LEGEND_MAX, 3, 2)
    legend = uicharts.legend_for(names, group_of, method_of, top_k=20)
    assert legend.entries == tuple(names) and not legend.entry_of, "one entry per run up to the limit"
    assert len(set(zip(legend.colours, legend.dashes))) == len(names), "seeds of a group in shades of its colour"
    names, group_of, method_of = _names(40, 15, 3)
    legend = uicharts.legend_for(names, group_of, method_of, top_k=20)
    assert len(legend.entries) == 15 and legend.entry_of["run13"] == "group13" and "one entry per group" in legend.note
    assert len(set(zip(legend.colours, legend.dashes))) == 15 and len(set(legend.colours)) == 15, "colour and dash"
    names, group_of, method_of = _names(100, 30, 3)
    rank = [f"group{index}" for index in range(29, -1, -1)]  # e.g. by a final metric, best first
    legend = uicharts.legend_for(names, group_of, method_of, rank=rank, top_k=20, ranked_by="final acc")
    assert legend.entries == (*rank[:20], colours.OTHERS) and legend.others == colours.OTHERS
    assert legend.colours[-1] == colours.OTHERS_COLOUR and len(set(legend.colours[:20])) == 20
    assert legend.entry_of["run0"] == colours.OTHERS and legend.entry_of["run29"] == "group29"
    assert "top 20 by final acc, 10 more as 'others'" in legend.note
    legend = uicharts.legend_for(names, group_of, method_of, rank=rank, top_k=5)
    assert legend.entries == (*rank[:5], colours.OTHERS), "the user's k"


def _series_spec(names: int, x_title: str = "step") -> dict:
    frame = pd.DataFrame([{"step": step, "run": f"r{index}", "value": 0.1 * index + step}
                          for index in range(names) for step in range(5)])
    chart = interactive.series(frame, "t", "y", interactive.Interaction(), {}, color_field="run", x_title=x_title)
    return interactive.to_spec(chart)


def test_the_legend_sits_below_the_plot_isolates_on_click_and_lines_highlight_on_hover() -> None:
    spec = _series_spec(5)
    params = {param["name"]: param for param in spec["params"]}
    assert params[interactive.ISOLATE]["bind"] == "legend"
    assert params[interactive.ISOLATE]["select"]["fields"] == [interactive.LEGEND_FIELD]
    assert params[interactive.HIGHLIGHT]["select"]["on"] == "pointerover"
    line = next(layer for layer in spec["layer"] if layer.get("name") in params[interactive.ISOLATE]["views"])
    legend = line["encoding"]["color"]["legend"]
    assert legend["orient"] == "bottom" and legend["symbolLimit"] == 0, "the plot keeps its width"
    assert legend["columns"] == interactive.legend_columns(None) >= 2
    assert legend["labelExpr"] == f"truncate(datum.label, {interactive.LEGEND_CHARS}, 'center')", "cut in the middle"
    assert legend["encoding"]["labels"]["tooltip"] == {"value": {"expr": "datum.value"}}, "the full name on hover"
    assert "encode" not in legend, "Vega's own encode would drop the entries' names: a click would isolate nothing"
    assert line["encoding"]["opacity"]["condition"]["test"]["param"] == interactive.ISOLATE
    assert line["encoding"]["strokeWidth"]["condition"]["test"]["param"] == interactive.HIGHLIGHT
    axis = line["encoding"]["x"]["axis"]
    assert axis["tickMinStep"] == 1 and axis["format"] == "d", "no step tick at 1.5"


def test_many_series_get_no_crosshair_labels_and_a_short_tooltip() -> None:
    few, many = _series_spec(3), _series_spec(interactive.LEGEND_MAX + 1)
    assert sum("text" in str(layer.get("mark")) for layer in few["layer"]) == 2
    assert sum("text" in str(layer.get("mark")) for layer in many["layer"]) == 0
    tooltip = next(layer for layer in few["layer"] if layer.get("name") in
                   {name for param in few["params"] for name in param["views"] if param["name"] == "crosshair"})
    calculate = [step for step in tooltip.get("transform", []) if "calculate" in step]
    assert calculate and all(interactive.NO_VALUE in step["calculate"] for step in calculate), \
        "a run without a value at the step says so, never NaN"


def test_producers_get_their_own_charts_and_zoom() -> None:
    frame = pd.DataFrame({"step": [1, 2, 3, 100, 200, 400], "run": ["t", "t", "t", "s", "s", "s"],
                          "value": np.linspace(0, 1, 6)})
    items = uicharts.split_by_producer(uicharts.Series(frame, "m", "m", color_field="run"),
                                       {"t": "gdro train", "s": "gdro-lab simulator"}, "run")
    assert [item.title for item in items] == ["m · gdro train", "m · gdro-lab simulator"]
    assert items[0].frame["step"].max() == 3 and items[1].frame["step"].min() == 100
    charts = [interactive.series(item.frame, item.title, "m", interactive.Interaction(), {}, color_field="run",
                                 zoom_group=item.zoom_group) for item in items]
    spec = interactive.linked(charts, columns=2)
    zooms = [param for param in spec["params"] if param.get("bind") == "scales"]
    assert len(zooms) == 2 and all(len(param["views"]) == 1 for param in zooms), "each producer zooms alone"


@pytest.mark.parametrize("seconds, unit", [(90.0, "s"), (600.0, "min"), (5 * 3600.0, "h")])
def test_wall_clock_units_follow_the_longest_run(seconds: float, unit: str) -> None:
    assert uicharts.clock_unit(seconds)[0] == unit
    frame = pd.DataFrame({"step": [0.0, 1.0, 0.0, 1.0], "run": ["a", "a", "b", "b"], "value": [1.0, 2.0, 3.0, 4.0]})
    clocks = {"a": (np.array([0.0, 1.0]), np.array([0.0, seconds])),
              "b": (np.array([0.0, 1.0]), np.array([0.0, seconds / 2]))}
    item = uicharts.on_wall_clock(uicharts.Series(frame, "t", "y", color_field="run"), clocks, run_field="run")
    factor = uicharts.clock_unit(seconds)[1]
    assert item.x_title == f"wall clock ({unit})" and item.x_domain == pytest.approx((0.0, seconds / factor))
    assert item.frame["step"].tolist() == pytest.approx([0, seconds / factor, 0, seconds / 2 / factor])


def test_heatmap_colours_auto_by_default_natural_on_request() -> None:
    weights = np.full((4, 10), 0.1) + np.linspace(-0.01, 0.01, 10)
    run = RunData(Path("w"), {"num_bins": 10}, {}, np.arange(4), {}, {"weight": weights})
    auto = uicharts.colour_domain("weight", [run])
    assert auto == pytest.approx([0.09, 0.11]), "10 weights near 0.1 span the colour map"
    assert uicharts.colour_domain("weight", [run], "natural") == [0.0, 1.0]
    assert uicharts.colour_note("weight", auto, "auto") == "weight · auto 0.09–0.11"
    assert uicharts.colour_note("weight", [0.0, 1.0], "natural") == "weight · natural 0–1"


def test_the_study_keeps_the_top_k_groups_apart_and_draws_the_rest_as_others(root100: Any,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The Study page at 20 groups with *Groups drawn apart* = 5: the 5 groups with the best final
    mean_success keep their own colour and dash, the other 15 are one grey "others" entry."""
    from app_helpers import assert_clean, find_view, open_app, visit

    from apps.data import identity, loading

    app = visit(open_app(monkeypatch, root100.root, view=None, query={"top": ["5"]}), "study")
    assert_clean(app)
    _, view = find_view(app, "mean_success")
    layer = next(layer for layer in view["layer"] if "strokeDash" in layer.get("encoding", {}))
    entries = layer["encoding"]["color"]["scale"]["domain"]
    assert len(entries) == 6 and entries[-1] == colours.OTHERS
    assert layer["encoding"]["color"]["scale"]["range"][-1] == colours.OTHERS_COLOUR
    runs = {label: loading.load_run(root100.root / label) for label in root100.study}
    grouping = identity.group_runs({label: run.config for label, run in runs.items()})
    finals: dict[str, list[float]] = {}
    for label, run in runs.items():
        finals.setdefault(grouping.group_of[label], []).append(study.final_value(run, "mean_success"))
    best = sorted(finals, key=lambda group: -float(np.mean(finals[group])))[:5]
    assert entries[:5] == best, "the top 5 by final mean_success"
