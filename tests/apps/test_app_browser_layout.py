"""Chart layout in headless Chromium, read from the rendered page at 1,280 and 1,600 px windows with
55-character run names (pinned display names): every chart stays on the page, every plot keeps its
width whatever the legend (legends below the plots, never over them), a long name is cut in its
middle and shown whole on hover, and a legend click on Compare fades every chart of the page, its
Evaluation chart included. Skipped without Debian's chromium or the playwright package."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote

import pytest
from gdro_app_synthetic import GROUPS, write_synthetic_run

import browser
from apps.data import pins
from apps.views import interactive

pytestmark = browser.pytest_marks()

NAME_CHARS = 55
#: The narrowest plot a chart may get (pixels): before, a baseline left 188 px to the per-group
#: evaluation chart at 1,280 px and the legend took the rest.
MIN_PLOT_PX = 240
TIMEOUT_S = 120

#: Per chart: the svg's right edge, its plots' widths (not the legends'), legends overlapping a plot;
#: and the page: the main column's content edge, the document's width against the window's.
LAYOUT = """() => {
    const main = document.querySelector('[data-testid="stMainBlockContainer"]');
    const edge = main.getBoundingClientRect().right - parseFloat(getComputedStyle(main).paddingRight);
    const boxes = (root, query) => Array.from(root.querySelectorAll(query)).map(node => node.getBoundingClientRect())
        .filter(box => box.width > 0 && box.height > 0);
    const charts = Array.from(document.querySelectorAll('[data-testid="stVegaLiteChart"]')).map(chart => {
        const plots = Array.from(chart.querySelectorAll('g.role-scope > g > path.background'))
            .filter(node => !node.closest('g.role-legend')).map(node => node.getBoundingClientRect())
            .filter(box => box.width > 0 && box.height > 0);
        const overlaps = [];
        for (const legend of boxes(chart, 'g.role-legend')) for (const plot of plots) {
            const w = Math.min(legend.right, plot.right) - Math.max(legend.left, plot.left);
            const h = Math.min(legend.bottom, plot.bottom) - Math.max(legend.top, plot.top);
            if (w > 1 && h > 1) overlaps.push([legend.left, legend.top, plot.left, plot.top]);
        }
        const svg = chart.querySelector('svg.marks');
        return {right: svg ? svg.getBoundingClientRect().right : 0, plots: plots.map(plot => plot.width), overlaps};
    });
    return {edge, scroll: document.documentElement.scrollWidth, window: window.innerWidth, charts}; }"""

#: Per view (a chart, or a row of charts) of the first chart element: its title and how many of its
#: lines are faded / drawn.
FADED = """() => Array.from(document.querySelector('[data-testid="stVegaLiteChart"]').querySelectorAll('g.role-scope'))
    .map(scope => { const title = scope.querySelector('g.role-title-text text');  // its first chart's
                    const paths = Array.from(scope.querySelectorAll('g.mark-line path'))
                        .map(path => path.getAttribute('opacity') || '1');
                    return [title ? title.textContent : '', paths.filter(o => o === String(%s)).length, paths.length]; })
    .filter(([title, faded, drawn]) => title && drawn)""" % interactive.DIMMED


def long_name(index: int, label: str) -> str:
    """A 55-character display name whose start and end differ from run to run."""
    head, tail = f"run {index} of a layout study", label
    return f"{head} {'-' * (NAME_CHARS - len(head) - len(tail) - 2)} {tail}"


def cut_in_the_middle(name: str) -> str:
    """Vega's truncate(name, LEGEND_CHARS, 'center') with its one-character ellipsis."""
    if len(name) <= interactive.LEGEND_CHARS:
        return name
    kept = interactive.LEGEND_CHARS - 1
    return name[:(kept + 1) // 2] + "…" + name[len(name) - kept // 2:]


@pytest.fixture(scope="module")
def named_root(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    """Four trainer runs (evaluations with groups) pinned to 55-character names; the app's state folder."""
    root = tmp_path_factory.mktemp("layout")
    state = tmp_path_factory.mktemp("layout-state")
    names = {}
    for index, (method, seed) in enumerate((m, s) for m in ("grpo", "prompt_gdro") for s in range(2)):
        label = f"{method}-tiny-s{seed}"
        write_synthetic_run(root / label, steps=20, num_bins=6, seed=seed, method=method, real=True,
                            layout="trainer", eval_every=5)
        names[label] = long_name(index, label)
        pins.save_pin(state / pins.PINS_FILE, root / label, pins.Pin(names[label], ()))
    assert all(len(name) == NAME_CHARS for name in names.values())
    return root, state, names


@pytest.fixture(scope="module")
def app_url(named_root: tuple[Path, Path, dict[str, str]], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root, state, _ = named_root
    with browser.running_app([], root, timeout_s=TIMEOUT_S, log_file=tmp_path_factory.mktemp("layout-log") / "app.log",
                             env={interactive.RENDERER_ENV: "svg", pins.STATE_ENV: str(state)}) as url:
        yield url


def _open(page: Any, url: str) -> None:
    page.goto(url, wait_until="domcontentloaded")
    browser.wait_for_view(page, min_charts=1, timeout_s=TIMEOUT_S)
    page.wait_for_timeout(500)  # the last chart's layout settles
    assert browser.error_texts(page) == []


@pytest.mark.parametrize("width", [1280, 1600])
def test_every_chart_keeps_its_plot_and_stays_on_the_page(width: int, app_url: str,
                                                          named_root: tuple[Path, Path, dict[str, str]]) -> None:
    _, _, names = named_root
    labels = sorted(names)
    pair = f"run={labels[0]}&baseline={labels[1]}"
    groups = "&".join(f"{role}-groups={quote(group)}" for group in GROUPS for role in ("run", "baseline"))
    views = {"Compare": f"compare?{'&'.join(f'pick={label}' for label in labels)}",
             "Evaluations": f"evaluations?{pair}&{groups}", "Traveling wave": f"traveling-wave?{pair}",
             "Outcomes": f"outcomes?{pair}"}
    with browser.chromium_page(width=width, height=1200) as page:
        for title, path in views.items():
            _open(page, f"{app_url}/{path}")
            layout = page.evaluate(LAYOUT)
            assert layout["scroll"] <= layout["window"], f"{title} at {width} px: the page scrolls sideways"
            for chart in layout["charts"]:
                assert chart["right"] <= layout["edge"] + 1, f"{title} at {width} px: a chart falls off the page"
                assert chart["overlaps"] == [], f"{title} at {width} px: a legend over a plot"
                assert all(plot >= MIN_PLOT_PX for plot in chart["plots"]), (title, width, chart["plots"])
            if title == "Evaluations":
                assert len(layout["charts"]) == 3 and all(chart["plots"] for chart in layout["charts"]), \
                    "the linked charts and the per-group chart of run and baseline"
            if title == "Compare":
                shown = page.evaluate("""() => Array.from(document.querySelectorAll(
                    '[data-testid="stVegaLiteChart"] g.role-legend-label text')).map(node => node.textContent)""")
                assert set(shown) == {cut_in_the_middle(name) for name in names.values()}, shown


def test_a_legend_entry_shows_its_full_name_and_a_click_fades_every_chart(
        app_url: str, named_root: tuple[Path, Path, dict[str, str]]) -> None:
    _, _, names = named_root
    labels = sorted(names)
    with browser.chromium_page(width=1280, height=1200) as page:
        _open(page, f"{app_url}/compare?{'&'.join(f'pick={label}' for label in labels)}")
        entry = page.locator('[data-testid="stVegaLiteChart"] g.role-legend-label text').first
        entry.hover()
        page.wait_for_selector("#vg-tooltip-element.visible", timeout=30_000)
        assert page.inner_text("#vg-tooltip-element").strip() == names[labels[0]]
        before = page.evaluate(FADED)
        assert before and all(faded == 0 for _, faded, _ in before)
        entry.click()
        page.wait_for_function(f"() => ({FADED})().every(([title, faded, drawn]) => faded > 0)", timeout=30_000)
        after = page.evaluate(FADED)
        assert any(title.startswith("Evaluation: ") for title, _, _ in after), after
        assert all(0 < faded < drawn for _, faded, drawn in after), "the other runs fade, in every chart"
