"""The app in headless Chromium at a generated root of 117 run candidates (``root100``): the run
table drives the charts, a legend click isolates a run, a damaged run is flagged and never the
default, no legend overlaps a plot (from the rendered layout), and on Traveling wave and Compare
the CSV download follows every selector changed from its default and matches the plotted data,
recomputed here from the runs' steps.jsonl (the other views: ``test_app_browser100_csv.py``;
shared helpers: ``browser100.py``).

The session's one server on the root (SVG renderer, so that marks and legends can be read from the
DOM: ``app100_url``) serves every test of this module; each test opens its own browser session.
Skipped without Debian's chromium or the playwright package, like the other browser tests.
"""

from __future__ import annotations

from typing import Any, Iterator
from urllib.parse import quote

import numpy as np
import pytest
from browser100 import CHART, TIMEOUT_S, choose, download, main_text, new_page, open_view, query, settle, steps
from root100 import Root100

import browser

pytestmark = browser.pytest_marks()

SWEEP_CELL = "sweep/runs/cell1"  # world.transfer = 0.5


@pytest.fixture(scope="module")
def app_url(app100_url: str) -> str:
    """The session's one server on ``root100`` (``app100_url``, tests/apps/conftest.py)."""
    return app100_url


@pytest.fixture
def page() -> Iterator[Any]:
    with new_page() as opened:
        yield opened


def _legend_labels(page: Any, chart: int = 0) -> list[str]:
    return page.evaluate("""([selector, index]) => Array.from(document.querySelectorAll(selector)[index]
        .querySelectorAll('g.role-legend-label text')).map(node => node.textContent)""", [CHART, chart])


def _line_opacities(page: Any) -> list[tuple[str, str]]:
    """(stroke colour, opacity) of every line path of the first chart."""
    return [tuple(pair) for pair in page.evaluate("""(selector) => Array.from(document.querySelector(selector)
        .querySelectorAll('g.mark-line path')).map(p => [p.getAttribute('stroke'), p.getAttribute('opacity') || '1'])""",
                                                  CHART)]


def test_table_filtering_drives_the_charts(app_url: str, root100: Root100, page: Any) -> None:
    open_view(page, app_url, "Runs", charts=0)
    page.wait_for_selector(browser.RUN_TABLE_SELECTOR)
    search = page.get_by_label("Search runs")
    search.fill("sweep transfer=0.5")
    search.press("Enter")
    page.get_by_text("4 of 116 runs shown").wait_for()
    browser.wait_for_view(page, min_charts=0)
    grid = page.locator('[data-testid="stMain"] [data-testid="stDataFrame"]').first.bounding_box()
    page.mouse.click(grid["x"] + 16, grid["y"] + 17)  # the header's tick box: every row shown
    page.get_by_text("4 picked:", exact=False).first.wait_for()
    browser.open_view_from_sidebar(page, "Compare", timeout_s=TIMEOUT_S)
    expected = sorted(label for label in root100.sweep if label.startswith(SWEEP_CELL))
    assert len(expected) == 4
    legend = set(_legend_labels(page))  # one legend per row of charts
    assert len(legend) == 4 and all(text.startswith("sweep: ") and "transfer=0.5" in text for text in legend), legend
    assert "?" in page.url and query("pick", expected[:1]).split("=")[1] in page.url, "the picks are in the URL"
    shown = page.evaluate("""(selector) => document.querySelectorAll(selector).length""",
                          f'{CHART} g.mark-line path')
    assert shown > 0 and browser.error_texts(page) == []


def test_a_legend_click_isolates_a_run(app_url: str, root100: Root100, page: Any) -> None:
    picks = sorted(label for label in root100.sweep if label.startswith(SWEEP_CELL))
    open_view(page, f"{app_url}/compare?{query('pick', picks)}", "Compare")
    before = _line_opacities(page)
    assert before and all(opacity == "1" for _, opacity in before)
    page.locator(f"{CHART} g.role-legend-label text").first.click()
    page.wait_for_function("""(selector) => Array.from(document.querySelector(selector)
        .querySelectorAll('g.mark-line path')).some(p => p.getAttribute('opacity') === '0.07')""", arg=CHART)
    after = _line_opacities(page)
    kept = {colour for colour, opacity in after if opacity == "1"}
    faded = {colour for colour, opacity in after if opacity != "1"}
    assert len(kept) == 1 and len(faded) == 3, after


def test_a_damaged_run_is_flagged_and_never_the_default(app_url: str, root100: Root100, page: Any) -> None:
    open_view(page, app_url, "Runs", charts=0)
    text = main_text(page)
    assert "1 run looks damaged" in text and "truncated: stops at step 30 of 60" in text
    assert "damaged: prompt_gdro · seed 0 (damaged/truncated)" in text
    open_view(page, f"{app_url}/lead-lag", "Lead-lag")
    assert "Run: study: grpo lr×0.354 · seed 0" in main_text(page), "the first healthy run, not the damaged one"
    open_view(page, f"{app_url}/lead-lag?run={quote(root100.truncated, safe='')}", "Lead-lag")
    text = main_text(page)
    assert "⚠ damaged" in text and "This run looks damaged: truncated" in text


OVERLAPS = """(selector) => {
    const boxes = (root, query) => Array.from(root.querySelectorAll(query)).map(node => node.getBoundingClientRect())
        .filter(box => box.width > 0 && box.height > 0);
    const out = [];
    for (const chart of document.querySelectorAll(selector)) {
        const plots = Array.from(chart.querySelectorAll('g.role-scope > g > path.background'))
            .filter(node => !node.closest('g.role-legend')).map(node => node.getBoundingClientRect())
            .filter(box => box.width > 0 && box.height > 0);
        const legends = boxes(chart, 'g.role-legend');
        for (const legend of legends) for (const plot of plots) {
            const w = Math.min(legend.right, plot.right) - Math.max(legend.left, plot.left);
            const h = Math.min(legend.bottom, plot.bottom) - Math.max(legend.top, plot.top);
            if (w > 1 && h > 1) out.push([legend.left, legend.top, plot.left, plot.top]);
        }
        out.push(...plots.filter(plot => plot.height < 100).map(plot => ['flat plot', plot.height]));
    }
    return out; }"""


def test_no_legend_overlaps_a_plot_at_100_runs(app_url: str, root100: Root100, page: Any) -> None:
    open_view(page, f"{app_url}/study", "Study")
    assert "20 groups of 5 seeds" in main_text(page)
    assert page.evaluate(OVERLAPS, CHART) == []
    legend = _legend_labels(page)
    assert len(set(legend)) == 20 and all(label.startswith("study: ") for label in legend), \
        "20 groups: one legend entry per group (each its own colour and dash)"
    everything = list(root100.readable)
    open_view(page, f"{app_url}/compare?{query('pick', everything)}", "Compare")
    assert page.evaluate(OVERLAPS, CHART) == []
    titles = page.evaluate("""(selector) => Array.from(document.querySelectorAll(selector + ' g.role-title-text text'))
        .map(node => node.textContent)""", CHART)
    assert "mean_success · gdro train" in titles and "mean_success · gdro-lab simulator" in titles, \
        "the trainer's 6 steps get their own chart, not a smear beside 60 simulator steps"
    ticks = page.evaluate("""(selector) => Array.from(document.querySelectorAll(selector +
        ' g.role-axis[aria-label^="X-axis"] g.role-axis-label text')).map(node => node.textContent)""", CHART)
    assert ticks and all(tick.replace(",", "").lstrip("-").isdigit() for tick in ticks), "integer step ticks"


def test_traveling_wave_csv_follows_every_selector(app_url: str, root100: Root100, page: Any) -> None:
    run = "study/runs/prompt_gdro/lr1/seed1"
    open_view(page, f"{app_url}/traveling-wave?run={quote(run, safe='')}", "Traveling wave", charts=2)
    page.get_by_text("Prompt-GDRO weight q(b)").last.click()  # "Snapshots of": the second field
    page.wait_for_function("() => window.location.search.includes('run-snapshots')")
    settle(page, 2)
    slider = page.get_by_test_id("stMain").get_by_role("slider").first  # the step: one logged step back
    slider.focus()
    slider.press("ArrowLeft")
    page.wait_for_function("() => window.location.search.includes('run-step')")
    settle(page, 2)
    rows = download(page, 1)  # the second CSV: the snapshot bars (the first: the heatmaps)
    charts = {row["chart"] for row in rows}
    assert charts == {"Prompt-GDRO weight q(b): snapshots and tail average"}, charts
    records = steps(root100.root, run)
    last = records[-2]["step"]  # the slider moved back one logged step
    chosen = [row for row in rows if row["snapshot"] == f"selected (step {last})"]
    expected = records[-2]["bins"]["weight"]
    assert [float(row["value"]) for row in sorted(chosen, key=lambda row: int(row["bin"]))] == \
        pytest.approx(expected, abs=5e-10)
    titles = page.evaluate("""(selector) => Array.from(document.querySelectorAll(selector + ' g.role-title-text text'))
        .map(node => node.textContent)""", CHART)
    assert "Prompt-GDRO weight q(b): snapshots and tail average" in titles, "the CSV is the chart drawn"


def test_compare_csv_follows_every_selector(app_url: str, root100: Root100, page: Any) -> None:
    picks = [label for label in root100.study if "/prompt_gdro/lr1/" in label]  # 5 seeds of one group
    open_view(page, f"{app_url}/compare?{query('pick', picks)}", "Compare")
    page.get_by_test_id("stMain").get_by_text("Group seeds").click()
    page.get_by_text("Group line").first.wait_for()
    settle(page, 1)
    choose(page, "compare-centre", "median", "lines: median over seeds")
    choose(page, "compare-interval", "IQR (25–75%)", "bands: IQR (25–75%)")
    choose(page, "compare-interval", "min–max", "bands: min–max")
    rows = [row for row in download(page, 0) if row["chart"] == "mean_success"]
    values_TS = np.array([[record["scalars"]["mean_success"] for record in steps(root100.root, label)]
                          for label in picks]).T
    assert [float(row["value"]) for row in rows] == pytest.approx(np.median(values_TS, axis=1), abs=5e-10)
    assert [float(row["lo"]) for row in rows] == pytest.approx(values_TS.min(axis=1), abs=5e-10)
    assert [float(row["hi"]) for row in rows] == pytest.approx(values_TS.max(axis=1), abs=5e-10)
    assert "lines: median over seeds; bands: min–max" in main_text(page)

