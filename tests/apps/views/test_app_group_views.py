"""The traveling-wave, lead-lag and SE-proxy pages over groups of seeds (AppTest): a group's charts and
CSV are the mean of its seeds' logged values, read here from the runs' steps.jsonl with json; two
groups stand side by side on one colour scale per field."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from app_helpers import assert_clean, heatmap_views, open_app, view_table, view_title, views, visit
from gdro_app_synthetic import SyntheticCurriculum, log_steps, open_synthetic_run, write_synthetic_run


METHODS = ("grpo", "prompt_gdro")
SEEDS, STEPS, SHORT_STEPS, BINS = 3, 30, 20, 6
GROUPS = "groups of seeds"
FIELDS = {"Prompt share q̂(b) [share]": "share", "Prompt-GDRO weight q(b) [weight]": "weight",
          "Realized reward [reward]": "reward"}


@pytest.fixture(scope="module")
def groups_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two methods x 3 seeds; Prompt-GDRO's seed 2 is still running at step 19 of 30 (a shorter seed),
    and GRPO has a damaged seed 3 (finished at step 7 of 30), which no group view may average in."""
    root = tmp_path_factory.mktemp("groups")
    damaged = SyntheticCurriculum(num_bins=BINS, total_steps=STEPS, seed=SEEDS, method="grpo")
    writer = open_synthetic_run(root / "grpo" / f"seed{SEEDS}", damaged)
    log_steps(writer, damaged, range(8))
    writer.close("finished")
    for method in METHODS:
        for seed in range(SEEDS):
            path = root / method / f"seed{seed}"
            if method == "prompt_gdro" and seed == SEEDS - 1:
                curriculum = SyntheticCurriculum(num_bins=BINS, total_steps=STEPS, seed=seed, method=method)
                writer = open_synthetic_run(path, curriculum)
                log_steps(writer, curriculum, range(SHORT_STEPS))
                writer.close("running")
            else:
                write_synthetic_run(path, steps=STEPS, num_bins=BINS, seed=seed, method=method)
    return root


def _records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "steps.jsonl").read_text().splitlines() if line.strip()]


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)


def _seed_mean(root: Path, method: str, values_of: Any) -> dict[tuple[int, int], tuple[float, int]]:
    """(step, index) -> (mean over the seeds logging the step of the finite values, seeds logging it);
    ``values_of(record)`` gives a record's values (a bin's list, or one scalar as a list)."""
    found: dict[tuple[int, int], list[float]] = {}
    seeds: dict[int, int] = {}
    for seed in range(SEEDS):
        for record in _records(root / method / f"seed{seed}"):
            seeds[record["step"]] = seeds.get(record["step"], 0) + 1
            for index, value in enumerate(values_of(record)):
                found.setdefault((record["step"], index), []).append(_number(value))
    out = {}
    for key, values in found.items():
        finite = [value for value in values if not math.isnan(value)]
        out[key] = (sum(finite) / len(finite) if finite else math.nan, seeds[key[0]])
    return out


def _show_groups(app: Any, page: str, first: str, beside: str | None = None) -> Any:
    app.radio(key=f"{page}-show").set_value(GROUPS).run()
    app.selectbox(key=f"{page}-group").select(first)
    if beside is not None:
        app.selectbox(key=f"{page}-beside").select(beside)
    app.run()
    assert_clean(app)
    return app


def _cells(chart: Any, view: dict[str, Any]) -> dict[tuple[int, int], float]:
    """(step, bin) -> value of a heatmap (valued and null cells)."""
    cells = {}
    for layer in view["layer"]:
        if layer["mark"]["type"] != "rect":
            continue
        table = view_table(chart, layer).to_pydict()
        for step, bin_index, value in zip(table["step"], table["bin"], table["value"]):
            cells[(int(step), int(bin_index))] = math.nan if value is None else value
    return cells


def _assert_mean(cells: dict[tuple[int, int], float], expected: dict[tuple[int, int], tuple[float, int]]) -> None:
    assert set(cells) == set(expected)
    for key, (value, _) in expected.items():
        assert cells[key] == pytest.approx(value, nan_ok=True), key


def test_a_groups_traveling_wave_and_its_csv_are_the_mean_of_its_seeds(
        groups_root: Path, monkeypatch: pytest.MonkeyPatch, exported: dict[str, pd.DataFrame]) -> None:
    app = _show_groups(open_app(monkeypatch, groups_root), "traveling-wave", "prompt_gdro")
    assert [element.value for element in app.subheader] == ["Group: prompt_gdro"]
    assert any("mean over 3 seeds (seed 0, 1, 2)" in element.value and
               "3 seeds at steps 0–19; 2 seeds at steps 20–29" in element.value for element in app.caption)
    maps = heatmap_views(app)
    assert [view_title(view) for _, view in maps] == list(FIELDS)
    for chart, view in maps:
        field = FIELDS[view_title(view)]
        expected = _seed_mean(groups_root, "prompt_gdro", lambda record: record["bins"][field])
        _assert_mean(_cells(chart, view), expected)
        csv = exported[f"prompt_gdro: {field}"]
        _assert_mean({(int(row.step), int(row.bin)): row.value for row in csv.itertuples()}, expected)
        assert {(int(row.step), int(row.bin)): int(row.n) for row in csv.itertuples()} == \
            {key: seeds for key, (_, seeds) in expected.items()}, "n: the seeds logging each step"


def test_median_across_seeds_is_the_median(groups_root: Path, monkeypatch: pytest.MonkeyPatch,
                                          exported: dict[str, pd.DataFrame]) -> None:
    app = _show_groups(open_app(monkeypatch, groups_root), "traveling-wave", "grpo")
    app.selectbox(key="traveling-wave-statistic").select("median").run()
    assert_clean(app)
    chart, view = heatmap_views(app)[0]
    seeds = [_records(groups_root / "grpo" / f"seed{seed}") for seed in range(SEEDS)]
    expected = {(record["step"], b): float(np.median([_number(run[index]["bins"]["share"][b]) for run in seeds]))
                for index, record in enumerate(seeds[0]) for b in range(BINS)}
    assert _cells(chart, view) == pytest.approx(expected)
    csv = exported["grpo: share"]
    assert {(int(row.step), int(row.bin)): row.value for row in csv.itertuples()} == pytest.approx(expected)


def test_two_groups_stand_side_by_side_on_one_colour_scale(groups_root: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    app = _show_groups(open_app(monkeypatch, groups_root), "traveling-wave", "grpo", beside="prompt_gdro")
    assert any(element.value.startswith("Left out as damaged: grpo · seed 3") for element in app.caption)
    columns = [[element.value for element in column.subheader] for column in app.columns]
    assert ["Group: grpo"] in columns and ["Beside it: prompt_gdro"] in columns, columns
    side = [block for block in app.main.children.values() if _holds(block, "Group: grpo")]
    assert side and _holds(side[0], "Beside it: prompt_gdro"), "both headers in one row of columns"
    maps = heatmap_views(app)
    assert len({id(chart) for chart, _ in maps}) == 1, "both groups' heatmaps in one element"
    assert len(maps) == 2 * len(FIELDS)
    assert len(json.loads(maps[0][0].proto.spec)["hconcat"]) == 2, "a column per group"
    for index, method in enumerate(METHODS):
        for chart, view in maps[index * len(FIELDS):(index + 1) * len(FIELDS)]:
            field = FIELDS[view_title(view)]
            _assert_mean(_cells(chart, view), _seed_mean(groups_root, method, lambda record: record["bins"][field]))
    for title in FIELDS:
        domains = [_colour_domain(view) for _, view in maps if view_title(view) == title]
        values = [value for chart, view in maps if view_title(view) == title
                  for value in _cells(chart, view).values() if not math.isnan(value)]
        assert domains[0] == domains[1], f"{title}: one colour scale for both groups"
        assert domains[0][0] <= min(values) and domains[0][1] >= max(values), title


def _holds(block: Any, text: str) -> bool:
    """True when ``text`` is a subheader anywhere inside ``block``."""
    if getattr(block, "type", "") == "subheader" or type(block).__name__ == "Subheader":
        return getattr(block, "value", None) == text
    return any(_holds(child, text) for child in getattr(block, "children", {}).values())


def _colour_domain(view: dict[str, Any]) -> list[float]:
    layer = next(layer for layer in view["layer"] if "color" in layer.get("encoding", {})
                 and "scale" in layer["encoding"]["color"])
    return layer["encoding"]["color"]["scale"]["domain"]


def _gap(record: dict[str, Any]) -> list[float]:
    """Eq. 32 of one logged step, by hand: Σ b w(b) / Σ w − Σ b q(b) / Σ q."""
    share = [_number(value) for value in record["bins"]["share"]]
    weight = [_number(value) for value in record["bins"]["weight"]]
    share = [0.0 if math.isnan(value) else value for value in share]
    weight = [0.0 if math.isnan(value) else value for value in weight]
    return [sum(b * w for b, w in enumerate(weight)) / sum(weight) - sum(b * q for b, q in enumerate(share)) / sum(share)]


@pytest.mark.parametrize("page, chart_title, series, values_of", [
    ("lead_lag", "Lead-lag gap Δμ(t)", "Δμ = μ_weight − μ_data", _gap),
    ("se_proxy", "Weighted SE proxy WSE(t)", "actual", lambda record: [record["scalars"]["se_actual"]]),
])
def test_two_groups_lead_lag_and_se_are_their_seed_means(page: str, chart_title: str, series: str, values_of: Any,
                                                         groups_root: Path, monkeypatch: pytest.MonkeyPatch,
                                                         exported: dict[str, pd.DataFrame]) -> None:
    key = page.replace("_", "-")
    app = _show_groups(visit(open_app(monkeypatch, groups_root), page), key, "grpo", beside="prompt_gdro")
    assert [element.value for element in app.subheader] == ["Group: grpo", "Beside it: prompt_gdro"]
    linked = [view for chart in app.get("vega_lite_chart") for view in views(chart) if view_title(view) == chart_title]
    assert len(linked) == 2, "the chart once per group, side by side"
    for method in METHODS:
        expected = _seed_mean(groups_root, method, values_of)
        rows = exported[f"{method}: {chart_title}"]
        rows = rows[rows["series"] == series]
        assert {(int(row.step), 0): row.value for row in rows.itertuples()} == pytest.approx(
            {key: value for key, (value, _) in expected.items()})
        assert {int(row.step): int(row.n) for row in rows.itertuples()} == {
            step: seeds for (step, _), (_, seeds) in expected.items()}
