"""The run table's numeric filter in headless Chromium at the generated 1,000-run root (``root1000``):
a filter typed on a metric column on the Runs page drives the charts of Compare, checked from the
chart's own CSV against the runs' files. Skipped without Debian's chromium or the playwright package.
"""

from __future__ import annotations

import math
from typing import Any, Iterator

import pytest
from browser100 import download, evals, open_view, settle, steps
from root1000 import Root1000

import browser

pytestmark = [*browser.pytest_marks(), pytest.mark.slow]
KEPT = 5


@pytest.fixture(scope="module")
def app_url(app1000_url: str) -> str:
    """The session's one server on ``root1000`` (``app1000_url``, tests/apps/conftest.py)."""
    return app1000_url


@pytest.fixture(scope="module")
def page() -> Iterator[Any]:
    with browser.chromium_page(width=1600, height=1200) as opened:
        opened.set_default_timeout(browser.PATIENCE_S * 1000)
        yield opened


def _final(root: Any, label: str, metric: str) -> float | None:
    """The last finite value of an evaluation metric, read by hand from the run's eval.jsonl."""
    values = [record["metrics"][metric] for record in evals(root, label)
              if isinstance(record["metrics"].get(metric), float) and math.isfinite(record["metrics"][metric])]
    return values[-1] if values else None


def test_a_numeric_filter_on_a_metric_column_drives_the_charts(app_url: str, root1000: Root1000, page: Any) -> None:
    finals = {label: value for label in root1000.healthy
              if (value := _final(root1000.root, label, "test/accuracy")) is not None}
    ranked = sorted(finals, key=lambda label: finals[label], reverse=True)
    threshold = (finals[ranked[KEPT - 1]] + finals[ranked[KEPT]]) / 2
    expected = ranked[:KEPT]
    open_view(page, app_url, "Runs", charts=0)
    page.wait_for_selector(browser.RUN_TABLE_SELECTOR)
    box = page.get_by_role("textbox", name="Filter runs where")
    box.fill(f"test/accuracy > {threshold!r}")
    box.press("Enter")
    page.get_by_text(f"{KEPT} runs meet", exact=False).wait_for()
    browser.wait_for_view(page, min_charts=0)
    assert "where=" in page.url, "the filter is kept in the URL"
    browser.open_view_from_sidebar(page, "Compare")
    settle(page, 1)
    rows = [row for row in download(page, 0) if row["chart"] == "mean_success"]
    last: dict[str, float] = {}
    for row in rows:
        last[row["run"]] = float(row["value"])  # in step order: the last row of a run is its last step
    logged = [steps(root1000.root, label)[-1]["scalars"]["mean_success"] for label in expected]
    assert len(last) == KEPT, sorted(last)
    assert sorted(last.values()) == pytest.approx(sorted(logged), abs=5e-10), \
        "Compare draws exactly the runs the filter keeps"
    assert browser.error_texts(page) == []
