"""What keeps long runs fast in the browser: thinned series (exact logged points, every series at
the same steps), lean specs (Arrow datasets, no per-mark ARIA text), stacked chart elements."""

from __future__ import annotations

from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from app_helpers import all_views, find_view, open_app, view_table, visit

from apps.views import charts, interactive
from gdro_app_synthetic import write_synthetic_run


def long_frame(steps: int, names: tuple[str, ...] = ("a", "b")) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"step": np.tile(np.arange(steps, dtype=float), len(names)),
                         "series": np.repeat(names, steps), "value": rng.normal(size=steps * len(names))})


def test_thin_steps_keeps_exact_points_on_a_common_grid() -> None:
    frame = long_frame(1000)
    thinned, stride = interactive.thin_steps(frame, 225)
    assert stride == 5  # ceil(1000 / 225)
    kept = sorted(set(thinned["step"]))
    assert kept[0] == 0 and kept[-1] == 999, "first and last logged steps always kept"
    assert kept[:-1] == list(range(0, 1000, 5)) and len(kept) <= 225 + 1
    for name, part in thinned.groupby("series"):
        assert sorted(part["step"]) == kept, f"{name}: every series at the same steps (one crosshair stop)"
    merged = thinned.merge(frame, on=["step", "series"], suffixes=("", "_logged"))
    assert len(merged) == len(thinned) and (merged["value"] == merged["value_logged"]).all(), "logged values"
    short, stride = interactive.thin_steps(long_frame(100), 225)
    assert stride == 1 and len(short) == 200, "short runs are drawn whole"
    assert interactive.max_points(450) == 225 and interactive.max_points(100) == interactive.MIN_POINTS


def test_lean_spec_sends_arrow_and_no_mark_descriptions() -> None:
    frame = pd.DataFrame({"step": [0.0, 1.0], "series": ["a", "a"], "value": [0.5, None]})
    spec = interactive.to_spec(alt.Chart(frame).mark_line().encode(x="step:Q", y="value:Q"))
    assert spec["config"]["mark"]["aria"] is False
    (payload,) = spec["datasets"].values()
    assert isinstance(payload, bytes)
    with pa.ipc.open_stream(payload) as reader:
        table = reader.read_all()
    assert table.column("value").to_pylist() == [0.5, None] and table.column("series").to_pylist() == ["a", "a"]


def test_text_columns_are_sent_once_per_distinct_value() -> None:
    """A long run name repeated at every step of 50 runs is sent as a dictionary (each name once),
    decoding to the same rows: 50 runs x 80 steps take under a third of the plain bytes."""
    names = tuple(f"runs/bimodal: a method with a long name lr×{index} · seed 0" for index in range(50))
    frame = long_frame(80, names)
    spec = interactive.to_spec(alt.Chart(frame).mark_line().encode(x="step:Q", y="value:Q", color="series:N"))
    (payload,) = spec["datasets"].values()
    with pa.ipc.open_stream(payload) as reader:
        table = reader.read_all()
    assert pa.types.is_dictionary(table.schema.field("series").type)
    assert not pa.types.is_dictionary(table.schema.field("value").type)
    assert table.column("series").to_pylist() == list(frame["series"])
    assert table.column("value").to_pylist() == pytest.approx(list(frame["value"]))
    plain = pa.Table.from_pandas(frame, preserve_index=False)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, plain.schema) as writer:
        writer.write_table(plain)
    assert len(payload) < sink.getvalue().size / 3


def test_stack_merges_datasets_and_keeps_each_view() -> None:
    frames = [pd.DataFrame({"step": [0.0, 10.0], "step_end": [10.0, 20.0], "bin": [0, 0], "label": ["b0", "b0"],
                            "value": [value, None]}) for value in (0.1, 0.7)]
    specs = [interactive.to_spec(charts.heatmap(frame, "share", f"map {i}", num_bins=1))
             for i, frame in enumerate(frames)]
    stacked = interactive.stack(specs, width=400)
    assert [view["title"] for view in stacked["vconcat"]] == ["map 0", "map 1"]
    assert all(view["width"] == 400 and "datasets" not in view for view in stacked["vconcat"])
    names = {layer["data"]["name"] for view in stacked["vconcat"] for layer in view["layer"] if "data" in layer}
    assert names == set(stacked["datasets"]) and len(names) == 3, "two valued datasets, one (identical) null one"
    assert stacked["resolve"]["scale"]["color"] == "independent"


def test_long_run_charts_are_thinned_and_say_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = write_synthetic_run(tmp_path / "runs" / "long", steps=700, num_bins=4, seed=1, method="both")
    app = visit(open_app(monkeypatch, run.parent), "lead_lag")
    chart, view = find_view(app, "Lead-lag gap Δμ(t)")
    assert "1 in" in view["title"]["subtitle"] and "of 700 logged steps" in view["title"]["subtitle"]
    steps = view_table(chart, view).column("step").to_pylist()
    assert 2 < len(steps) <= interactive.max_points(1040) + 1 and steps[-1] == 699.0
    assert all("raw" not in view_table(chart, part).column_names for _, part in all_views(app)), \
        "no faint raw copy without smoothing"


def _rows(spec: dict) -> dict:
    """Each dataset of a lean spec as its rows, and the spec with the datasets' names replaced by
    their order of first use (altair names datasets by a hash of JSON rows, the app by its Arrow bytes)."""
    import json
    import re

    text = json.dumps({key: value for key, value in spec.items() if key != "datasets"}, sort_keys=True)
    order = list(dict.fromkeys(re.findall(r'"name": "(data-[0-9a-f]+)"', text)))
    for index, name in enumerate(order):
        text = text.replace(name, f"D{index}")
    rows = {}
    for index, name in enumerate(order):
        payload = spec["datasets"][name]
        with pa.ipc.open_stream(payload) as reader:
            rows[f"D{index}"] = reader.read_all().to_pylist()
    return {"spec": json.loads(text), "rows": rows}


def _altair_spec(chart: alt.TopLevelMixin) -> dict:
    """The reference: altair's own conversion (row dictionaries), made lean as the app sends it."""
    with alt.data_transformers.disable_max_rows(), alt.theme.enable("none"):
        return interactive.lean(chart.to_dict(validate=False))


def test_frames_go_to_arrow_with_altair_types_and_rows() -> None:
    """A chart with untyped fields (altair infers them from the frame) and a frame shared by two layers
    (one dataset): the same spec and rows as altair's own conversion."""
    frame = pd.DataFrame({"step": [0.0, 1.0, 2.0], "series": ["a", "b", "a"], "value": [0.5, None, 2.0]})
    untyped = alt.Chart(frame).mark_line().encode(x="step", y="value", color="series")
    shared = alt.layer(alt.Chart(frame).mark_line().encode(x="step:Q", y="value:Q"),
                       alt.Chart(frame).mark_point().encode(x="step:Q", y="value:Q"))
    for chart in (untyped, shared):
        spec = interactive.to_spec(chart)
        assert all(isinstance(payload, bytes) for payload in spec["datasets"].values())
        assert _rows(spec) == _rows(_altair_spec(chart))
    assert interactive.to_spec(untyped)["encoding"]["x"]["type"] == "quantitative", "type inferred from the frame"
    assert len(interactive.to_spec(shared)["datasets"]) == 1, "one dataset for the frame both layers read"


def test_linked_rows_is_altairs_concat_of_the_same_charts() -> None:
    """The grid put together as dicts equals altair's vconcat of hconcats, the same charts, made
    lean and numbered by to_spec (the markers, the parameters at the top, the independent colours)."""
    frames = [long_frame(12, names) for names in (("a", "b"), ("a", "c"), ("d",))]
    items = [interactive.series(frame, f"chart {index}", "value", interactive.Interaction(), {},
                                width=300) for index, frame in enumerate(frames)]
    rows = [items[:2], items[2:]]
    ours = interactive.linked_rows(rows)
    combined = alt.VConcatChart(vconcat=[alt.HConcatChart(hconcat=list(rows[0])), rows[1][0]])
    combined.resolve = alt.Resolve(scale=alt.ScaleResolveMap(color="independent", strokeDash="independent"))
    combined.usermeta = {"embedOptions": {"renderer": "canvas"}}
    with alt.data_transformers.disable_max_rows(), alt.theme.enable("none"):
        theirs = combined.to_dict(validate=False)
    # to_spec's numbering and parameters on altair's dict (its own concat may lift nothing: no params)
    reference = interactive._finish(theirs)
    assert _rows(ours) == _rows(reference)
    assert {param["name"] for param in ours["params"]} >= {interactive.ZOOM, interactive.ISOLATE}
