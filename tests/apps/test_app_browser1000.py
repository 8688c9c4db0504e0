"""The app in headless Chromium at a generated root shaped like one ``gdro arena`` output
(``root1000``: 1,020 simulator runs, 150 trainer runs, 4 damaged folders, an empty one): the run table
lists every readable run, flags the damaged ones and names the unreadable and empty folders; Compare's
Evaluation chart and the Evaluations page's per-group chart keep their plot area with a baseline set at
a 1,280 px window, as at a handful of runs (``test_app_browser_layout.py`` measures the same way).

The session's one server on the root (SVG renderer, so that plots can be measured from the DOM: ``app1000_url``)
serves every test of this module.
Speed is not checked here: ``benchmarks/bench_app.py --only scale`` measures it. Skipped without
Debian's chromium or the playwright package.
"""

from __future__ import annotations

from typing import Any, Iterator
from urllib.parse import quote

import pytest
from browser100 import main_text, query
from gdro_app_synthetic import GROUPS
from root1000 import BAD_META, EMPTY, NEWER, NO_STEPS, TRUNCATED, Root1000
from test_app_browser_layout import LAYOUT, MIN_PLOT_PX

import browser

pytestmark = [*browser.pytest_marks(), pytest.mark.slow]

WIDTH = 1280


@pytest.fixture(scope="module")
def app_url(app1000_url: str) -> str:
    """The session's one server on ``root1000`` (``app1000_url``, tests/apps/conftest.py)."""
    return app1000_url


@pytest.fixture(scope="module")
def page() -> Iterator[Any]:
    """One browser for the module (each test opens its own pages of it: a new session each)."""
    with browser.chromium_page(width=WIDTH, height=1200) as opened:
        opened.set_default_timeout(browser.PATIENCE_S * 1000)
        yield opened


def _open(page: Any, url: str, charts: int) -> None:
    page.goto(url, wait_until="domcontentloaded")
    browser.wait_for_view(page, min_charts=charts, timeout_s=browser.PATIENCE_S)
    page.wait_for_timeout(500)  # the last chart's layout settles
    assert browser.error_texts(page) == []


def _plots(page: Any) -> list[list[float]]:
    """Per chart of the page, the widths of its plots (legends left out)."""
    layout = page.evaluate(LAYOUT)
    assert layout["scroll"] <= layout["window"], "the page scrolls sideways"
    return [chart["plots"] for chart in layout["charts"]]


def _titles(page: Any) -> list[str]:
    return page.evaluate("""() => Array.from(document.querySelectorAll(
        '[data-testid="stVegaLiteChart"] g.role-title-text text')).map(node => node.textContent)""")


def test_the_run_table_lists_every_run_and_names_the_others(app_url: str, root1000: Root1000, page: Any) -> None:
    page.goto(app_url, wait_until="domcontentloaded")
    browser.wait_for_run_table(page, timeout_s=browser.PATIENCE_S)
    listed = len(root1000.healthy) + 2  # the truncated run and the one without steps: readable, flagged
    page.get_by_text(f"{listed} of {listed} runs shown").wait_for()
    text = main_text(page)
    assert "2 runs look damaged" in text, "the damaged runs are flagged"
    for label in (TRUNCATED, NO_STEPS):
        assert f"({label})" in text or f"`{label}`" in text or label in text, label
    assert "truncated: stops at step" in text and "truncated: no step logged of 400" in text
    assert "2 run folders" in text and "cannot be read" in text
    for label in (NEWER, BAD_META):
        assert label in text, f"{label}: an unreadable folder is named with its reason"
    lines = [line for line in text.splitlines() if EMPTY in line]
    assert any(("empty folder" in line or "is empty" in line or "no run" in line) for line in lines), \
        "the empty folder is listed as empty"


def test_compare_keeps_the_evaluation_chart_with_a_baseline_at_1280_px(
        app_url: str, root1000: Root1000, page: Any) -> None:
    picks = [label for label in root1000.trainer if "/grpo-lr1-" in label or "/knapsack-lr1-" in label][:4]
    assert len(picks) == 4
    _open(page, f"{app_url}/compare?{query('pick', picks)}", charts=1)
    assert any(title.startswith("Evaluation: ") for title in _titles(page)), _titles(page)
    plots = _plots(page)
    assert plots and all(widths and min(widths) >= MIN_PLOT_PX for widths in plots), plots


def test_the_per_group_evaluation_chart_keeps_its_plot_with_a_baseline_at_1280_px(
        app_url: str, root1000: Root1000, page: Any) -> None:
    run, baseline = (label for label in root1000.trainer if "/knapsack-lr1-s0" in label or "/grpo-lr1-s0" in label)
    groups = "&".join(f"{role}-groups={quote(group)}" for group in GROUPS for role in ("run", "baseline"))
    _open(page, f"{app_url}/evaluations?run={quote(run, safe='')}&baseline={quote(baseline, safe='')}&{groups}",
          charts=3)
    plots = _plots(page)
    assert len(plots) == 3, "the linked charts and the per-group chart of run and baseline"
    assert all(widths and min(widths) >= MIN_PLOT_PX for widths in plots), plots
