"""Many groups and the sweep's brush in headless Chromium, at the generated root of 117 run
candidates (``root100``): 15 groups on Compare are drawn with 15 distinct (colour, dash) pairs and
15 distinct band colours, read from the rendered SVG; a brush over a parallel-coordinates axis of
the Sweep view filters its run table and its charts.

One server (SVG renderer) serves both tests; each opens its own browser session. Skipped without
Debian's chromium or the playwright package, like the other browser tests.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest
from browser100 import CHART, main_text, new_page, open_view, query, serve, settle
from root100 import Root100

import browser

pytestmark = browser.pytest_marks()


@pytest.fixture(scope="module")
def app_url(root100: Root100, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve(root100.root, tmp_path_factory.mktemp("app-groups") / "app.log") as url:
        yield url


@pytest.fixture
def page() -> Iterator[Any]:
    with new_page() as opened:
        yield opened


def _fifteen_groups(root100: Root100) -> list[str]:
    """75 study runs: 3 methods x 5 learning-rate scales, 5 seeds each (15 groups)."""
    picks = [label for label in root100.study if "matched" not in label and "/lr0.353553/" not in label]
    assert len(picks) == 75
    return picks


def test_15_groups_are_drawn_with_distinct_colours_and_dashes(app_url: str, root100: Root100, page: Any) -> None:
    picks = _fifteen_groups(root100)
    open_view(page, f"{app_url}/compare?{query('pick', picks)}&compare-group=true", "Compare")
    page.get_by_text("Final results per group", exact=False).first.wait_for()
    settle(page, 1)
    drawn = page.evaluate("""(selector) => {
        const chart = document.querySelector(selector);
        const view = chart.querySelector('svg.marks');
        const lines = Array.from(view.querySelectorAll('g.mark-line path')).filter(p => (p.getAttribute('opacity') || '1') === '1'
            && (p.getAttribute('stroke-width') || '2') === '2');
        const areas = Array.from(view.querySelectorAll('g.mark-area path'));
        const legend = Array.from(view.querySelectorAll('g.role-legend-label text')).map(t => t.textContent);
        return {lines: lines.map(p => [p.getAttribute('stroke'), p.getAttribute('stroke-dasharray') || 'solid']),
                fills: areas.map(p => p.getAttribute('fill')), legend: legend}; }""", CHART)
    styles = {tuple(pair) for pair in drawn["lines"]}
    per_chart = len(drawn["lines"]) // 15
    assert per_chart >= 1 and len(drawn["lines"]) == 15 * per_chart, drawn["lines"]
    assert len(styles) == 15, f"15 groups in {len(styles)} (colour, dash) styles: {sorted(styles)}"
    assert len({colour for colour, _ in styles}) == 15, "and 15 colours: bands (no dash) stay apart too"
    assert len(set(drawn["fills"])) == 15, f"15 bands in {len(set(drawn['fills']))} colours"
    assert len(set(drawn["legend"])) == 15 and browser.error_texts(page) == []


ROWS_JS = """Array.from(document.querySelectorAll('[data-testid="stMain"] [data-testid="stDataFrame"] table'
                                           + ' td[aria-colindex="1"]')).map(c => c.textContent)"""


def _table_rows(page: Any, count: int) -> list[str]:
    """The run names in the Sweep page's table (the data grid's accessible table), once it has ``count`` rows."""
    page.wait_for_function(f"() => {ROWS_JS}.length === {count}")
    return list(page.evaluate(f"() => {ROWS_JS}"))


def test_a_brushed_sweep_axis_filters_the_table_and_the_charts(app_url: str, root100: Root100, page: Any) -> None:
    picks = list(root100.sweep)  # world.transfer 0, 0.5, 1 x 2 methods x 2 seeds
    open_view(page, f"{app_url}/sweep?{query('pick', picks)}", "Sweep", charts=2)
    assert len(_table_rows(page, 12)) == 12 and "All 12 runs" in main_text(page)
    axes = page.evaluate("""(selector) => Array.from(document.querySelector(selector).querySelector('g.mark-rule')
        .querySelectorAll('line')).map(l => { const r = l.getBoundingClientRect(); return [r.x + r.width / 2, r.y,
                                                                                           r.y + r.height]; })""",
                         CHART)
    assert len(axes) == 2, "world.transfer, then the metric"
    x, top, bottom = axes[0]

    def at(position: float) -> float:
        return bottom - position * (bottom - top)

    page.mouse.move(x - 12, at(0.6))  # a brush around transfer = 0.5, the middle of the axis
    page.mouse.down()
    page.mouse.move(x, at(0.5), steps=5)
    page.mouse.move(x + 12, at(0.4), steps=5)
    page.mouse.up()
    page.get_by_text("Brushed: 4 of 12 runs", exact=False).first.wait_for()
    settle(page, 2)
    rows = _table_rows(page, 4)
    assert sorted(rows) == sorted(f"sweep: {method} transfer=0.5 · seed {seed}" for method in ("grpo", "prompt_gdro")
                                  for seed in (0, 1)), rows
    ticks = page.evaluate("""(selector) => Array.from(document.querySelectorAll(selector)[1]
        .querySelectorAll('g.role-axis-label text')).map(t => t.textContent)""", CHART)
    assert len([tick for tick in ticks if tick.startswith("0.5")]) >= 1 and not any(tick in ("0", "1") for tick in ticks), \
        f"the chart against world.transfer shows only the brushed setting: {ticks}"
    assert browser.error_texts(page) == []
