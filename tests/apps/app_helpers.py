"""Helpers for the AppTest-based tests: open the app on some runs, read back its charts."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

from apps.data.settings import ROOT_ENV, RUNS_ENV

APP_SCRIPT = Path(__file__).resolve().parents[2] / "apps" / "streamlit_app.py"
PAGES = ("traveling_wave", "lead_lag", "rollout_budget", "se_proxy", "outcomes", "compare", "config")
TIMEOUT_S = 300  # a page run on a loaded 2-core machine can pass 60 s: a hang guard, not a speed check


def open_app(monkeypatch: pytest.MonkeyPatch, root: Path, runs: Sequence[Path] = (),
             view: str | None = "traveling_wave", query: Mapping[str, str | list[str]] | None = None) -> AppTest:
    """Open the app with ``root`` as runs folder and ``runs`` given explicitly (and ``query`` as the
    URL's query parameters), then go to ``view``.

    The landing page is the run table (``view=None`` stays there); the per-run tests start from
    the first per-run view, Traveling wave, as a user's first click does.
    """
    monkeypatch.setenv(ROOT_ENV, str(root))
    if runs:
        monkeypatch.setenv(RUNS_ENV, os.pathsep.join(str(path) for path in runs))
    else:
        monkeypatch.delenv(RUNS_ENV, raising=False)
    app = AppTest.from_file(str(APP_SCRIPT), default_timeout=TIMEOUT_S)
    for key, value in (query or {}).items():
        app.query_params[key] = value
    app.run()
    return app if view is None else visit(app, view)


def run_labels(app: AppTest) -> list[str]:
    """The folder labels of the runs the sidebar lists (its picker shows their names)."""
    return [entry.label for entry in app.session_state["_gdro_selection"].entries]


def download_buttons(app: AppTest) -> list[Any]:
    """The download buttons of the page (their protos: label, file name)."""
    return [element.proto for element in app.get("download_button")]


def visit(app: AppTest, page: str) -> AppTest:
    """Switch to one view (a file in apps/views/) and run it."""
    return app.switch_page(f"views/{page}.py").run()


def charts(app: AppTest) -> list[Any]:
    """The altair (vega-lite) chart elements of the current page."""
    return list(app.get("vega_lite_chart"))


def spec(chart: Any) -> dict[str, Any]:
    """The vega-lite spec of a chart element."""
    return json.loads(chart.proto.spec)


def title(chart: Any) -> str:
    """The chart's title (top level, or of its first layer)."""
    chart_spec = spec(chart)
    value = chart_spec.get("title") or next((layer.get("title") for layer in chart_spec.get("layer", [])), "")
    return value if isinstance(value, str) else str(value.get("text", ""))


def marks(chart: Any) -> set[str]:
    """Mark types used by a chart (over its layers)."""
    chart_spec = spec(chart)
    found = set()
    for part in [chart_spec, *chart_spec.get("layer", [])]:
        mark = part.get("mark")
        if mark is not None:
            found.add(mark if isinstance(mark, str) else mark.get("type", ""))
    return found


def datasets(chart: Any) -> list[pa.Table]:
    """The datasets a chart carries (Arrow IPC streams), as Arrow tables."""
    tables = []
    for dataset in chart.proto.datasets:
        with pa.ipc.open_stream(dataset.data.data) as reader:
            tables.append(reader.read_all())
    return tables


def dataset_rows(chart: Any) -> list[int]:
    """Rows of each dataset the chart carries."""
    return [table.num_rows for table in datasets(chart)]


def view_marks(view: dict[str, Any]) -> set[str]:
    """Mark types used by one view (over its layers)."""
    found = set()
    for part in [view, *view.get("layer", [])]:
        mark = part.get("mark")
        if mark is not None:
            found.add(mark if isinstance(mark, str) else mark.get("type", ""))
    return found


def heatmap_views(app: AppTest) -> list[tuple[Any, dict[str, Any]]]:
    """(chart element, view) of every view drawn with rect marks (the steps x bins heatmaps; a run's
    heatmaps are stacked in one chart element)."""
    return [(chart, view) for chart, view in all_views(app) if "rect" in view_marks(view)]


def heatmaps(app: AppTest) -> list[dict[str, Any]]:
    """The heatmap views of the page, in order."""
    return [view for _, view in heatmap_views(app)]


def view_datasets(chart: Any, view: dict[str, Any]) -> list[pa.Table]:
    """The datasets the layers of one view read, as Arrow tables."""
    names = {layer.get("data", {}).get("name") for layer in [view, *view.get("layer", [])]} - {None}
    tables = []
    for dataset in chart.proto.datasets:
        if dataset.name in names:
            with pa.ipc.open_stream(dataset.data.data) as reader:
                tables.append(reader.read_all())
    return tables


def assert_clean(app: AppTest) -> None:
    """No exception element and no error element on the page."""
    assert not app.exception, [element.value for element in app.exception]
    assert not app.error, [element.value for element in app.error]


def views(chart: Any) -> list[dict[str, Any]]:
    """The charts inside a linked chart (vconcat / hconcat flattened), or the chart itself."""
    found: list[dict[str, Any]] = []

    def walk(part: dict[str, Any]) -> None:
        for key in ("vconcat", "hconcat", "concat"):
            if key in part:
                for child in part[key]:
                    walk(child)
                return
        found.append(part)

    walk(spec(chart))
    return found


def view_title(view: dict[str, Any]) -> str:
    value = view.get("title", "")
    return value if isinstance(value, str) else str(value.get("text", ""))


def all_views(app: AppTest) -> list[tuple[Any, dict[str, Any]]]:
    """(chart element, view spec) for every chart on the page, linked or not."""
    return [(chart, view) for chart in charts(app) for view in views(chart)]


def view_titles(app: AppTest) -> list[str]:
    return [view_title(view) for _, view in all_views(app)]


def view_table(chart: Any, view: dict[str, Any]) -> pa.Table:
    """The dataset a view reads (by name), as an Arrow table."""
    name = view.get("data", {}).get("name")
    for dataset in chart.proto.datasets:
        if dataset.name == name:
            with pa.ipc.open_stream(dataset.data.data) as reader:
                return reader.read_all()
    raise KeyError(f"no dataset {name!r} in the chart")


def find_view(app: AppTest, wanted: str) -> tuple[Any, dict[str, Any]]:
    """The (chart, view) whose title is ``wanted``."""
    for chart, view in all_views(app):
        if view_title(view) == wanted:
            return chart, view
    raise AssertionError(f"no chart titled {wanted!r}: {view_titles(app)}")


def data_tables(app: AppTest) -> list[list[list[str]]]:
    """Every table (``st.dataframe``) the page shows, read back: rows of cells as text (the header
    first), in the frame's column order; a missing value is ""."""
    tables = []
    for element in app.dataframe:
        frame = element.value
        rows = [[str(column) for column in frame.columns]]
        rows += [["" if value is None or (isinstance(value, float) and value != value) else str(value)
                  for value in row] for row in frame.itertuples(index=False)]
        tables.append(rows)
    return tables


def markdown_only(app: AppTest) -> list[list[list[str]]]:
    """Every Markdown table the page shows (``apps.data.runtable.markdown_table``: the unreadable run
    folders), read back: rows of cells (the header first, the separator dropped), Markdown
    backslash escapes undone. Parsed here independently of the writer."""
    import re

    tables = []
    for element in app.markdown:
        lines = element.value.splitlines()
        if len(lines) < 2 or not lines[0].startswith("| ") or not re.fullmatch(r"\|(-{3}:?\|)+", lines[1]):
            continue
        tables.append([[re.sub(r"\\(.)", r"\1", cell) for cell in line[2:-2].split(" | ")]
                       for line in [lines[0], *lines[2:]]])
    return tables


def markdown_tables(app: AppTest) -> list[list[list[str]]]:
    """Every table of the page read back as text: the data frames (the run table, the config
    diff), then the Markdown tables (the unreadable run folders)."""
    return data_tables(app) + markdown_only(app)


def series_layer(view: dict[str, Any]) -> dict[str, Any]:
    """The first layer of a time-series chart that draws its series (it carries the colour and
    the y scale; a zero rule, when there is one, is drawn under it)."""
    return next(layer for layer in view["layer"] if "color" in layer.get("encoding", {}))
