"""The app in a real headless Chromium: it loads, draws the heatmaps, shows no error, and is not blank.

Needs Debian's chromium (``apt-get install -y chromium fonts-dejavu-core``) and the playwright
Python package; skipped with the reason when either is missing. The server is started with
``python -m gdro_cli app`` on a free localhost port and always stopped.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from PIL import Image

from apps import browser

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not browser.CHROMIUM.exists(),
                       reason=f"{browser.CHROMIUM} is missing: apt-get install -y chromium"),
    pytest.mark.skipif(importlib.util.find_spec("playwright") is None,
                       reason="the playwright Python package is missing: pip install -e '.[dev]'"),
]

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
            page.goto(f"{url}/?run=study/prompt_gdro", wait_until="domcontentloaded")
            browser.wait_for_view(page, min_charts=3)
            assert browser.error_texts(page) == []
            assert page.get_by_text("Run: study/prompt_gdro").count() == 1
            assert browser.drawn_charts(page) >= 3, "three heatmaps (and the snapshot bars of the open tab)"
            page.screenshot(path=str(tmp_path / "app.png"))
            page.locator(HEATMAP_SELECTOR).first.screenshot(path=str(tmp_path / "heatmap.png"))

            page.goto(f"{url}/?run=not-a-run", wait_until="domcontentloaded")
            page.wait_for_selector(browser.ERROR_SELECTOR, timeout=30_000)
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
            browser.wait_for_view(page, min_charts=2)
            page.get_by_text("10 steps", exact=False).first.wait_for(timeout=30_000)
            append(5)
            # Live refresh is on for a running run and rereads every 5 s: no click, no reload.
            page.get_by_text("15 steps", exact=False).first.wait_for(timeout=30_000)
            assert browser.error_texts(page) == []
