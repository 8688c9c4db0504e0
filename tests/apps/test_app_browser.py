"""The app in a real headless Chromium: it loads, draws the heatmaps, shows no error, and is not blank.

Needs Debian's chromium (``apt-get install -y chromium fonts-dejavu-core``) and the playwright
Python package; skipped with the reason when either is missing. The server is started with
``python -m gdro_cli app`` on a free localhost port and always stopped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
from PIL import Image

import browser
from apps.views import interactive
from browser100 import (add_option, assert_in_url, choose_baseline, move_slider, new_page, open_view, serve, settle,
                        widget)
from gdro_app_synthetic import write_synthetic_run

pytestmark = browser.pytest_marks()

HEATMAP_SELECTOR = '[data-testid="stVegaLiteChart"]'


def pixels(png: Path) -> np.ndarray:
    """RGB pixels of a screenshot as an (H, W, 3) uint8 array."""
    with Image.open(png) as image:
        return np.asarray(image.convert("RGB"))


def assert_not_blank(png: Path, min_colours: int) -> None:
    """A rendered picture varies, and has many distinct colours (a blank or all-white page has one)."""
    rgb = pixels(png)
    assert rgb.shape[0] > 100 and rgb.shape[1] > 100
    assert rgb.std() > 10, f"{png} is nearly uniform"
    colours = len(np.unique(rgb.reshape(-1, 3), axis=0))
    assert colours >= min_colours, f"{png} has only {colours} colours"


def test_app_renders_heatmaps_in_chromium(runs_root: Path, not_a_run: Path, tmp_path: Path) -> None:
    with browser.running_app([not_a_run], runs_root, log_file=tmp_path / "app.log") as url:
        with browser.chromium_page(width=1400, height=1600) as page:
            requested: list[str] = []
            page.on("request", lambda request: requested.append(request.url))
            page.goto(url, wait_until="domcontentloaded")  # the landing page is the run table: no chart
            browser.wait_for_run_table(page)
            assert browser.drawn_charts(page) == 0 and page.get_by_text("runs", exact=False).count() >= 1
            spill = page.evaluate("""() => {
                const grid = document.querySelector('[data-testid="stMain"] [data-testid="stDataFrame"]');
                return grid.getBoundingClientRect().right
                    - document.querySelector('[data-testid="stMainBlockContainer"]').getBoundingClientRect().right; }""")
            assert spill <= 1, f"the run table spills {spill} px past the page instead of scrolling sideways"
            page.goto(f"{url}/traveling-wave?run=study/prompt_gdro", wait_until="domcontentloaded")
            browser.wait_for_view(page, min_charts=2)
            assert browser.error_texts(page) == []
            assert page.get_by_text("Run: study: prompt_gdro · seed 1").count() == 1
            assert browser.drawn_charts(page) >= 2, "the three heatmaps (one stacked chart) and the snapshot bars"
            page.screenshot(path=str(tmp_path / "app.png"))
            page.locator(HEATMAP_SELECTOR).first.screenshot(path=str(tmp_path / "heatmap.png"))
            page.wait_for_timeout(500)
            foreign = [address for address in requested if not address.startswith((url, "data:", "blob:"))]
            assert foreign == [], "a page load asks only the app itself (no font host for the icon)"
            icons = page.eval_on_selector_all("link[rel~='icon']", "links => links.map(link => link.href)")
            assert icons and all(href.startswith((url, "data:")) for href in icons), icons

            page.goto(f"{url}/traveling-wave?run=not-a-run", wait_until="domcontentloaded")
            page.wait_for_selector(browser.ERROR_SELECTOR)
            errors = browser.error_texts(page)
            assert any("not a gdro run directory" in text for text in errors), errors
            assert page.query_selector('[data-testid="stException"]') is None, "a message, not a traceback"
    assert_not_blank(tmp_path / "app.png", min_colours=200)
    assert_not_blank(tmp_path / "heatmap.png", min_colours=100)


def test_live_run_refreshes_on_its_own(live_run: tuple[Path, Callable[[int], None]], tmp_path: Path) -> None:
    path, append = live_run
    with browser.running_app([], path.parent, log_file=tmp_path / "app.log") as url:
        with browser.chromium_page(width=1400, height=1200) as page:
            page.goto(f"{url}/lead-lag", wait_until="domcontentloaded")
            browser.wait_for_view(page, min_charts=1)
            page.get_by_text("10 steps", exact=False).first.wait_for()
            append(5)
            # Live refresh is on for a running run and rereads every 5 s: no click, no reload.
            page.get_by_text("15 steps", exact=False).first.wait_for()
            assert browser.error_texts(page) == []
            page.goto(f"{url}/runs", wait_until="domcontentloaded")
            page.get_by_text("1 of 1 runs", exact=False).first.wait_for()
            write_synthetic_run(path.parent / "newer", steps=5, num_bins=6, seed=9)
            # Live mode searches the runs folder again: the new run appears without a click.
            page.get_by_text("2 of 2 runs", exact=False).first.wait_for()
            assert browser.error_texts(page) == []


#: Per x axis of every chart on the page: its tick labels (they follow the zoom; the aria label lags).
AXIS_LABELS = """() => Array.from(document.querySelectorAll(
    '[data-testid="stVegaLiteChart"] g.role-axis[aria-label^="X-axis"]')).map(axis => Array.from(
    axis.querySelectorAll('g.role-axis-label text')).map(text => text.textContent).join(','))"""


def test_study_bands_linked_zoom_and_crosshair(seeds_root: Path, tmp_path: Path) -> None:
    # SVG so that axis ticks and crosshair labels can be read from the DOM (the default canvas
    # renderer draws the same Vega signals: zoom and crosshair do not depend on the renderer).
    env = {interactive.RENDERER_ENV: "svg"}
    with browser.running_app([], seeds_root, log_file=tmp_path / "app.log", env=env) as url:
        with browser.chromium_page(width=1400, height=1400) as page:
            requested: list[str] = []
            page.on("request", lambda request: requested.append(request.url))
            page.goto(url, wait_until="domcontentloaded")  # the first run registers the pages
            browser.wait_for_run_table(page)  # landing: the run table
            page.goto(f"{url}/study", wait_until="domcontentloaded")
            page.wait_for_function("""() => { const h = document.querySelector('[data-testid="stMain"] h1');
                                              return h && h.innerText.trim() === 'Study'; }""")
            browser.wait_for_view(page, min_charts=1)
            page.wait_for_function("() => document.querySelectorAll('[data-testid=\"stVegaLiteChart\"] "
                                   "g.role-axis').length >= 8")
            assert browser.error_texts(page) == []
            # Bands: every one of the 4 charts shades a 95% interval per method (2 methods).
            bands = page.eval_on_selector_all('[data-testid="stVegaLiteChart"] g.mark-area path',
                                              "paths => paths.filter(p => (p.getAttribute('d') || '').length > 50).length")
            assert bands >= 4 * 2, bands
            before = page.evaluate(AXIS_LABELS)
            assert len(before) == 4 and len(set(before)) == 1 and before[0].startswith("0,"), before
            chart = page.locator('[data-testid="stVegaLiteChart"] svg').first.bounding_box()
            assert chart is not None
            # Crosshair: hover inside the first chart; every chart shows a label per method.
            page.mouse.move(chart["x"] + 250, chart["y"] + 150)
            page.wait_for_function("""() => Array.from(document.querySelectorAll(
                '[data-testid="stVegaLiteChart"] g.mark-text text')).filter(t => t.textContent.includes(': ')).length >= 8""")
            texts = page.eval_on_selector_all('[data-testid="stVegaLiteChart"] g.mark-text text',
                                              "nodes => nodes.map(node => node.textContent)")
            labelled = [text for text in texts if ": " in text]
            assert sum(text.startswith("grpo: ") for text in labelled) == 4, labelled
            assert sum(text.startswith("prompt_gdro: ") for text in labelled) == 4, labelled
            page.screenshot(path=str(tmp_path / "crosshair.png"))
            # Zoom: the wheel over the first chart changes the x-range of every chart on the page.
            page.wait_for_timeout(500)  # a pause before the action (no verdict depends on it)
            page.mouse.wheel(0, -400)
            page.wait_for_function(f"(before) => {{ const now = ({AXIS_LABELS})(); return now.length === 4 && "
                                   "now.every((labels, i) => labels !== before[i]) && new Set(now).size === 1; }",
                                   arg=before)  # the outcome, however long a loaded machine takes to redraw
            after = page.evaluate(AXIS_LABELS)
            assert len(after) == 4
            assert all(new != old for new, old in zip(after, before)), (before, after)
            assert len(set(after)) == 1, "one shared x-range"
            # Brush-drag (pan) moves every chart again, together.
            page.mouse.move(chart["x"] + 300, chart["y"] + 150)
            page.mouse.down()
            page.mouse.move(chart["x"] + 150, chart["y"] + 150, steps=8)
            page.mouse.up()
            page.wait_for_function(f"(after) => {{ const now = ({AXIS_LABELS})(); return now.length === 4 && "
                                   "now.every((labels, i) => labels !== after[i]) && new Set(now).size === 1; }",
                                   arg=after)
            panned = page.evaluate(AXIS_LABELS)
            assert all(new != old for new, old in zip(panned, after)) and len(set(panned)) == 1, (after, panned)
            foreign = [address for address in requested if not address.startswith((url, "data:", "blob:"))]
            assert foreign == [], foreign
    assert_not_blank(tmp_path / "crosshair.png", min_colours=100)


def _main_text(page) -> str:  # type: ignore[no-untyped-def]
    return str(page.locator('[data-testid="stMain"]').inner_text())


def test_unreadable_runs_are_named_not_hidden(runs_root: Path, tmp_path: Path) -> None:
    import json
    import shutil

    root = tmp_path / "root"
    shutil.copytree(runs_root / "study" / "grpo", root / "good")
    shutil.copytree(runs_root / "study" / "grpo", root / "newer")
    meta = json.loads((root / "newer" / "meta.json").read_text())
    (root / "newer" / "meta.json").write_text(json.dumps({**meta, "version": 99}))
    shutil.copytree(runs_root / "study" / "grpo", root / "broken")
    (root / "broken" / "meta.json").write_text("{not json")
    with browser.running_app([], root, log_file=tmp_path / "app.log") as url:
        with browser.chromium_page(width=1400, height=1400) as page:
            page.goto(url, wait_until="domcontentloaded")
            browser.wait_for_run_table(page)
            page.get_by_text("cannot be read and are not listed above", exact=False).first.wait_for()
            text = _main_text(page)
            assert "newer than this gdro-lab reads" in text and "meta.json is corrupt" in text
            assert "2 run folders under the runs folder cannot be read" in page.get_by_test_id("stSidebar").inner_text()
            page.goto(f"{url}/lead-lag?run=newer", wait_until="domcontentloaded")
            page.get_by_text("cannot be read", exact=False).first.wait_for()
            assert "newer than this gdro-lab reads" in _main_text(page)
            assert browser.error_texts(page) == []


def test_the_url_keeps_the_view_across_pages_and_links(lr_root: Path, tmp_path: Path) -> None:
    query = "run=prompt_gdro%2Flr2%2Fseed1&baseline=grpo%2Flr0.5%2Fseed0"
    with browser.running_app([], lr_root, log_file=tmp_path / "app.log") as url:
        with browser.chromium_page(width=1400, height=1400) as page:
            page.goto(f"{url}/lead-lag?{query}", wait_until="domcontentloaded")
            browser.wait_for_view(page, min_charts=1)
            assert "Run: prompt_gdro lr×2 · seed 1" in _main_text(page)
            browser.open_view_from_sidebar(page, "Outcomes")
            page.wait_for_function("() => window.location.search.includes('baseline=')")
            assert "run=prompt_gdro%2Flr2%2Fseed1" in page.url and "baseline=grpo%2Flr0.5%2Fseed0" in page.url
            assert page.url.split("?")[0].endswith("/outcomes")
            shared = page.url
            assert "Baseline: grpo lr×0.5 · seed 0" in _main_text(page)
        with browser.chromium_page(width=1400, height=1400) as page:  # a fresh browser opens the shared link
            page.goto(shared, wait_until="domcontentloaded")
            browser.wait_for_view(page, min_charts=1)
            text = _main_text(page)
            assert "Run: prompt_gdro lr×2 · seed 1" in text and "Baseline: grpo lr×0.5 · seed 0" in text
            page.goto(f"{url}/outcomes?run=nope", wait_until="domcontentloaded")
            page.get_by_text("No run is labelled", exact=False).first.wait_for()
            assert "Run: " not in _main_text(page), "no other run is shown in its place"


#: Per-run view -> (title, the run's widgets: a slider, a radio's option, or a multiselect's option
#: added to the one in the URL before the baseline is picked).
PER_RUN_WIDGETS = {"traveling-wave": ("Traveling wave", {"run-step": "slider",
                                                          "run-snapshots": "Prompt-GDRO weight q(b)"}),
                   "rollout-budget": ("Rollout budget", {"run-step": "slider", "run-frontier": "slider"}),
                   "outcomes": ("Outcomes", {"run-eval-more": ("pooled/mean@8", "worst_benchmark/mean@8")}),
                   "evaluations": ("Evaluations", {"run-groups": ("algebra", "geometry")})}


def test_a_per_run_views_widgets_stay_in_the_url_after_a_baseline_is_picked(trainer_root: Path,
                                                                            tmp_path: Path) -> None:
    """After a baseline is picked in the sidebar, every widget of the run's column changed still
    writes its value into the URL, so a copied link keeps it (was: the chart followed the widget,
    the URL kept the value from before the pick)."""
    with serve(trainer_root, tmp_path / "app.log") as url, new_page() as page:
        for path, (title, changes) in PER_RUN_WIDGETS.items():
            preset = "".join(f"&{key}={change[0]}" for key, change in changes.items() if isinstance(change, tuple))
            open_view(page, f"{url}/{path}?run=prompt_gdro-tiny-s0{preset}", title)
            choose_baseline(page, "grpo · seed 0")
            wanted = {"baseline": "grpo-tiny-s0"}
            for key, change in changes.items():
                if change == "slider":
                    wanted[key] = move_slider(page, key, ["ArrowLeft"], lambda: None)
                elif isinstance(change, tuple):
                    add_option(page, key, change[1], lambda: None)
                    wanted[key] = ",".join(change)
                else:
                    widget(page, key).get_by_text(change).click()
                    settle(page)
                    wanted[key] = change
            assert_in_url(page, wanted)


def test_grouping_by_a_config_key_in_the_browser(lr_root: Path, tmp_path: Path) -> None:
    with browser.running_app([], lr_root, log_file=tmp_path / "app.log") as url:
        with browser.chromium_page(width=1400, height=1400) as page:
            page.goto(f"{url}/study", wait_until="domcontentloaded")
            browser.wait_for_view(page, min_charts=1)
            page.get_by_text("grpo lr×0.5: 2 seeds", exact=False).first.wait_for()
            box = page.get_by_test_id("stSidebar").get_by_test_id("stMultiSelect").first
            box.click()
            page.keyboard.type("lr_scale")
            page.keyboard.press("Enter")
            page.keyboard.press("Escape")
            page.get_by_text("lr×0.5: 4 seeds", exact=False).first.wait_for()
            assert "grpo lr×0.5: 2 seeds" not in _main_text(page), "grouped by the learning rate alone"
            page.wait_for_function("() => window.location.search.includes('group=lr_scale')")
            assert browser.error_texts(page) == []


def test_chart_data_downloads_as_csv(seeds_root: Path, tmp_path: Path) -> None:
    import csv

    with browser.running_app([], seeds_root, log_file=tmp_path / "app.log") as url:
        with browser.chromium_page(width=1400, height=1400) as page:
            page.goto(f"{url}/lead-lag?run=prompt_gdro%2Fseed0", wait_until="domcontentloaded")
            browser.wait_for_view(page, min_charts=1)
            with page.expect_download() as download:
                page.get_by_text("Chart data (CSV)").first.click()
            target = tmp_path / "lead-lag.csv"
            download.value.save_as(target)
            rows = list(csv.DictReader(target.open()))
            assert download.value.suggested_filename.endswith(".csv")
            assert {"chart", "step", "series", "value"} <= set(rows[0])
            charts = {row["chart"] for row in rows}
            assert any("Lead-lag gap" in chart for chart in charts) and any("Mean bin index" in chart for chart in charts)
            gap = [row for row in rows if "Lead-lag gap" in row["chart"]]
            assert len(gap) == 30 and [float(row["step"]) for row in gap] == list(range(30)), "every logged step"


def test_tooltip_shows_every_series(seeds_root: Path, tmp_path: Path) -> None:
    with browser.running_app([], seeds_root, log_file=tmp_path / "app.log") as url:
        with browser.chromium_page(width=1400, height=1400) as page:
            page.goto(f"{url}/lead-lag?run=prompt_gdro%2Fseed0", wait_until="domcontentloaded")
            browser.wait_for_view(page, min_charts=1)
            chart = page.locator('[data-testid="stVegaLiteChart"]').first.bounding_box()
            assert chart is not None
            # the second chart (two series), in its plot area
            page.mouse.move(chart["x"] + 0.3 * chart["width"], chart["y"] + 0.75 * chart["height"])
            page.wait_for_function("() => { const t = document.getElementById('vg-tooltip-element'); "
                                   "return t && t.classList.contains('visible'); }")
            tip = page.evaluate("() => document.getElementById('vg-tooltip-element').innerText")
            assert "μ_weight (under weights)" in tip and "μ_data (under data)" in tip and "step" in tip, tip
