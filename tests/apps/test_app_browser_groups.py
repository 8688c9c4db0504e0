"""Many groups and the sweep's brush in headless Chromium, at the generated arena-shaped root of
1,172 run candidates (``root1000``): 15 groups on Compare are drawn with 15 distinct (colour, dash)
pairs and 15 distinct band colours, read from the rendered SVG; a brush over a parallel-coordinates
axis of the Sweep view filters its run table and its charts, and fades the other runs' lines; a second
brush on another axis narrows them (the first one held, drawn as a grey band) until "Clear brushes".

The session's one server on the root (SVG renderer: ``app1000_url``) serves both tests; each opens its
own browser session. Skipped without Debian's chromium or the playwright package, like the other browser tests.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest
from browser100 import CHART, main_text, new_page, open_view, query, settle
from root1000 import Root1000

from apps.data import loading, sweep

import browser

pytestmark = browser.pytest_marks()


@pytest.fixture(scope="module")
def app_url(app1000_url: str) -> str:
    """The session's one server on ``root1000`` (``app1000_url``, tests/apps/conftest.py)."""
    return app1000_url


@pytest.fixture
def page() -> Iterator[Any]:
    with new_page() as opened:
        yield opened


def _runs(root1000: Root1000, methods: tuple[str, ...], scales: tuple[str, ...] | None = None) -> list[str]:
    """The simulator runs of ``methods`` in the default world (at learning-rate ``scales``; all by default)."""
    return [label for label in root1000.simulator if label.split("/")[1] == "default" and label.split("/")[2] in methods
            and (scales is None or label.split("/")[3] in scales)]


def test_15_groups_are_drawn_with_distinct_colours_and_dashes(app_url: str, root1000: Root1000, page: Any) -> None:
    picks = _runs(root1000, ("grpo", "gdro_prompt", "rollout_gdro"), ("lr0.5", "lr0.707107", "lr1", "lr1.41421", "lr2"))
    assert len(picks) == 45, "3 methods x 5 learning-rate scales, 3 seeds each: 15 groups"
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


#: The Sweep page's metric in the brush test (its query parameter).
METRIC = "mean_success"
TABLE = '[data-testid="stMain"] [data-testid="stDataFrame"] table'


def _table_rows(page: Any, count: int, column: int = 1) -> list[str]:
    """The run names (or the cells of another ``column``, from 1) in the Sweep page's table once it
    has ``count`` rows (the data grid's accessible table: its row count, and the cells of the rows it
    draws, every row when they fit)."""
    page.wait_for_function("""([selector, count]) => { const table = document.querySelector(selector);
        return table && Number(table.getAttribute("aria-rowcount")) === count + 1; }""", arg=[TABLE, count])
    return list(page.evaluate("""([selector, column]) => Array.from(document.querySelectorAll(
        selector + ` td[aria-colindex="${column}"]`)).map(cell => cell.textContent)""", [TABLE, column]))


def test_a_brushed_sweep_axis_filters_the_table_and_the_charts(app_url: str, root1000: Root1000, page: Any) -> None:
    picks = _runs(root1000, ("grpo", "gdro_prompt"))  # 2 methods x 6 learning-rate scales x 3 seeds
    assert len(picks) == 36
    open_view(page, f"{app_url}/sweep?{query('pick', picks)}&sweep-metric={METRIC}", "Sweep", charts=2)
    assert _table_rows(page, 36) and "All 36 runs" in main_text(page)
    axes = page.evaluate("""(selector) => Array.from(document.querySelector(selector).querySelector('g.mark-rule')
        .querySelectorAll('line')).map(l => { const r = l.getBoundingClientRect(); return [r.x + r.width / 2, r.y,
                                                                                           r.y + r.height]; })""",
                         CHART)
    assert len(axes) == 2, "lr_scale, then the metric"
    x, top, bottom = axes[0]

    def at(position: float) -> float:
        return bottom - position * (bottom - top)

    page.mouse.move(x - 12, at(0.47))  # a brush around lr 0.7071, at 0.4 of the log axis (0.3536 to 2)
    page.mouse.down()
    page.mouse.move(x, at(0.4), steps=5)
    page.mouse.move(x + 12, at(0.33), steps=5)
    page.mouse.up()
    page.get_by_text("Brushed: 6 of 36 runs", exact=False).first.wait_for()
    settle(page, 2)
    rows = _table_rows(page, 6)
    assert len(rows) == 6 and all("lr×0.707" in row for row in rows) and {row.split("·")[-1].strip() for row in rows} == \
        {"seed 0", "seed 1", "seed 2"}, rows
    opacities = page.evaluate("""(selector) => Array.from(document.querySelector(selector)
        .querySelectorAll('g.mark-line path')).map(path => path.getAttribute('opacity'))""", CHART)
    assert len(opacities) == 36 and opacities.count("0.5") == 6, "the parallel coordinates fade the other 30 runs"
    ticks = page.evaluate("""(selector) => Array.from(document.querySelectorAll(selector)[1]
        .querySelectorAll('g.role-axis-label text')).map(t => t.textContent)""", CHART)
    assert ticks and not any(tick in ("0.5", "1", "2") for tick in ticks), \
        f"the chart against lr_scale shows only the brushed setting: {ticks}"
    assert browser.error_texts(page) == []

    # a second rectangle, on the metric's axis, holds the first one: the runs inside both stay
    runs = {label: loading.load_run(root1000.root / label) for label in picks}
    parallel = sweep.parallel_frame(runs, ["lr_scale"], METRIC, "tail mean")
    on_metric = parallel[parallel["axis"] == METRIC].set_index("label")
    mine = sorted(float(on_metric.at[label, "position"]) for label in picks if "/lr0.707107/" in label)
    gap, cut = max((high - low, (low + high) / 2) for low, high in zip(mine, mine[1:]))
    x, top, bottom = axes[1]
    assert gap * (bottom - top) > 6, f"two of the six runs at least 6 px apart on the metric's axis: {mine}"
    expected = [on_metric.at[label, "raw"] for label in picks
                if "/lr0.707107/" in label and on_metric.at[label, "position"] > cut]
    page.mouse.move(x - 12, at(cut))
    page.mouse.down()
    page.mouse.move(x, at(1.0), steps=5)
    page.mouse.move(x + 12, top - 4, steps=5)
    page.mouse.up()
    page.get_by_text(f"Brushed: {len(expected)} of 36 runs", exact=False).first.wait_for()
    settle(page, 2)
    kept = _table_rows(page, len(expected), column=4)
    assert sorted(kept) == sorted(expected), "lr 0.7071 (the held brush) and the metric above the cut (the live one)"
    assert all("lr×0.707" in row for row in _table_rows(page, len(expected)))
    bands = page.evaluate("""(selector) => Array.from(document.querySelector(selector)
        .querySelectorAll('g.mark-rect.role-mark path')).map(path => path.getAttribute('fill'))""", CHART)
    assert bands.count("#777777") == 1, f"the held lr brush drawn as one grey band (beside the live brush): {bands}"
    page.get_by_role("button", name="Clear brushes").click()
    page.get_by_text("All 36 runs", exact=False).first.wait_for()
    assert _table_rows(page, 36) and browser.error_texts(page) == []
