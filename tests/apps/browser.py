"""Headless-Chromium helpers: serve the app with ``gdro app``, open it, wait for charts, screenshot views.

A test harness, not part of the app: used by the browser tests (``import browser``: pytest puts
this folder on the path), ``benchmarks/bench_app.py`` and to take the README screenshots::

    python tests/apps/browser.py --out docs/screenshots --root RUNS_ROOT [RUN_DIR ...]

Needs Debian's ``chromium`` (``/usr/bin/chromium``) and the ``playwright`` Python package
(imported lazily); every wait is bounded and the server is always stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

CHROMIUM = Path(os.environ.get("GDRO_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
#: (url path, file name, title) of every view, in navigation order (see apps/streamlit_app.py);
#: the default view is served at the root URL.
VIEWS = (("", "runs", "Runs"), ("traveling-wave", "traveling-wave", "Traveling wave"), ("study", "study", "Study"),
         ("sweep", "sweep", "Sweep"),
         ("lead-lag", "lead-lag", "Lead-lag"),
         ("rollout-budget", "rollout-budget", "Rollout budget"), ("se-proxy", "se-proxy", "SE proxy"),
         ("outcomes", "outcomes", "Outcomes"), ("compare", "compare", "Compare"),
         ("evaluations", "evaluations", "Evaluations"), ("step-time", "step-time", "Step time"),
         ("config", "config", "Config"))
#: Views that may show no chart (tables only, or a simulator run without evaluations / step times).
CHARTLESS = frozenset({"Config", "Runs", "Evaluations", "Step time", "config", "runs", "evaluations", "step-time"})
CHART_SELECTOR = '[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg.marks'
ERROR_SELECTOR = '[data-testid="stException"], [data-testid="stAlertContentError"]'
RUNNING_SELECTOR = '[data-testid="stStatusWidget"]'
#: The landing page's run table (an interactive data grid: apps/views/runs.py), once drawn.
RUN_TABLE_SELECTOR = '[data-testid="stMain"] [data-testid="stDataFrame"] canvas'
#: The limit of every wait here and of every Playwright wait on a page from :func:`chromium_page`: a guard
#: against a hang, not a speed check (a wait polls for its outcome and ends as soon as it holds; a page on a
#: loaded 2-core machine can take over a minute). Speed is measured in benchmarks/bench_app.py.
PATIENCE_S = 300.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_healthy(url: str, process: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the app exited early with code {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"the app did not answer at {url} within {timeout_s:.0f} s")


@contextlib.contextmanager
def running_app(run_dirs: Sequence[Path], root: Path, timeout_s: float = PATIENCE_S,
                log_file: Path | None = None, env: Mapping[str, str] | None = None) -> Iterator[str]:
    """Serve the app with ``python -m gdro_cli app`` on a free localhost port; yields its URL.

    The server runs in its own process group, which is terminated (then killed) on exit; ``env``
    adds environment variables (e.g. ``GDRO_APP_RENDERER=svg``).
    """
    port = free_port()
    command = [sys.executable, "-m", "gdro_cli", "app", "--root", str(root), "--port", str(port),
               *[str(path) for path in run_dirs]]
    log = open(log_file, "wb") if log_file is not None else subprocess.DEVNULL
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                               env={**os.environ, **(env or {})})
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, process, timeout_s)
        yield url
    finally:
        _stop(process)
        if log_file is not None:
            log.close()  # type: ignore[union-attr]


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate the server's process group; kill it if it does not stop within 10 s."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@contextlib.contextmanager
def chromium_page(width: int = 1600, height: int = 1000) -> Iterator[Any]:
    """A Playwright page in Debian's headless Chromium."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(PATIENCE_S * 1000)
            yield page
        finally:
            browser.close()


def drawn_charts(page: Any) -> int:
    """Charts drawn on the page right now (charts in hidden tabs are not drawn)."""
    return int(page.evaluate("(selector) => document.querySelectorAll(selector).length", CHART_SELECTOR))


def wait_for_view(page: Any, min_charts: int = 1, timeout_s: float = PATIENCE_S, settle_s: float = 0.3) -> float:
    """Wait until at least ``min_charts`` charts are drawn, the script run has finished and the
    number of drawn charts has not changed for ``settle_s``; returns the seconds until the last
    chart appeared (the render time)."""
    start = time.monotonic()
    deadline = start + timeout_s
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_s * 1000)
    if min_charts:
        page.wait_for_function("([selector, count]) => document.querySelectorAll(selector).length >= count",
                               arg=[CHART_SELECTOR, min_charts], timeout=timeout_s * 1000, polling=20)
    count, changed_at = drawn_charts(page), time.monotonic()
    while time.monotonic() < deadline:
        running = page.query_selector(RUNNING_SELECTOR) is not None
        now_count = drawn_charts(page)
        if now_count != count:
            count, changed_at = now_count, time.monotonic()
        elif not running and time.monotonic() - changed_at >= settle_s:
            return changed_at - start
        page.wait_for_timeout(20)
    raise TimeoutError(f"the view did not settle within {timeout_s:.0f} s ({count} charts drawn)")


def wait_for_run_table(page: Any, timeout_s: float = PATIENCE_S) -> float:
    """Wait for the landing page (the run table, no chart) to be drawn and settled; returns seconds."""
    page.wait_for_selector(RUN_TABLE_SELECTOR, timeout=timeout_s * 1000)
    return wait_for_view(page, min_charts=0, timeout_s=timeout_s)


def open_view_from_sidebar(page: Any, title: str, timeout_s: float = PATIENCE_S) -> float:
    """Click a view in the sidebar navigation (as a user does) and wait for it; returns seconds from
    the click until its last chart is drawn."""
    start = time.monotonic()
    page.get_by_test_id("stSidebarNav").get_by_text(title, exact=True).click()
    page.wait_for_function(
        """(title) => { const h = document.querySelector('[data-testid="stMain"] h1');
                         return h && h.innerText.trim() === title; }""",
        arg=title, timeout=timeout_s * 1000, polling=20)
    waited = time.monotonic() - start
    return waited + wait_for_view(page, min_charts=0 if title in CHARTLESS else 1, timeout_s=timeout_s)


def fit_viewport_to_content(page: Any, width: int, tries: int = 5) -> None:
    """Grow the viewport to the main column's height, so a screenshot shows the whole view; measured
    again after a pause until the height holds (a view may still be laying out when first measured)."""
    previous = -1
    for _ in range(tries):
        height = page.evaluate("""() => {
            const main = document.querySelector('[data-testid="stMainBlockContainer"]');
            return main ? main.scrollHeight + 120 : 1000; }""")
        if height == previous:
            return
        page.set_viewport_size({"width": width, "height": int(min(max(height, 800), 8000))})
        previous = height
        page.wait_for_timeout(500)


def pytest_marks() -> list[Any]:
    """``pytestmark`` of every browser test module: marked ``browser``, skipped without Debian's
    chromium or the playwright package (pytest is imported here only, not by the benchmark)."""
    import importlib.util

    import pytest

    return [pytest.mark.browser,
            pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing: apt-get install -y chromium"),
            pytest.mark.skipif(importlib.util.find_spec("playwright") is None,
                               reason="the playwright Python package is missing: pip install -e '.[dev]'")]


def error_texts(page: Any) -> list[str]:
    """Texts of exception and error elements on the page."""
    return [element.inner_text() for element in page.query_selector_all(ERROR_SELECTOR)]


def capture_views(url: str, out_dir: Path, width: int = 1600, height: int = 1000, query: str = "",
                  views: Sequence[str] | None = None, palette: bool = False) -> list[Path]:
    """Screenshot views (whole page) into ``out_dir/<view>.png``; returns the files.

    ``query`` is appended to each URL (e.g. ``run=study/prompt_gdro&baseline=study/grpo``);
    ``views`` picks views by file name (default: all); ``palette`` stores 256-colour PNGs
    (a third of the size, for docs).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    with chromium_page(width, height) as page:
        page.goto(url + (f"?{query}" if query else ""), wait_until="domcontentloaded")
        page.wait_for_selector('[data-testid="stMain"] h1', timeout=PATIENCE_S * 1000)
        wait_for_view(page, min_charts=0)  # the first run (the landing run table) registers every page's URL
        for url_path, name, title in VIEWS:
            if views is not None and name not in views:
                continue
            page.set_viewport_size({"width": width, "height": height})
            page.goto(f"{url}/{url_path}" + (f"?{query}" if query else ""), wait_until="domcontentloaded")
            page.wait_for_function(
                """(title) => { const h = document.querySelector('[data-testid="stMain"] h1');
                                 return h && h.innerText.trim() === title; }""", arg=title, timeout=PATIENCE_S * 1000)
            # chartless views (tables only, or a run without evaluations) may still draw charts:
            # wait until nothing new has been drawn for a while before measuring the page
            wait_for_view(page, min_charts=0 if name in CHARTLESS else 1, settle_s=1.5 if name in CHARTLESS else 0.3)
            page.wait_for_timeout(1000)  # let vega lay the charts out before measuring the page
            fit_viewport_to_content(page, width)
            wait_for_view(page, min_charts=0)
            page.wait_for_timeout(1000)  # let vega finish drawing at the new size
            problems = error_texts(page)
            if problems:
                raise RuntimeError(f"{name}: the page shows an error: {problems[0]}")
            target = out_dir / f"{name}.png"
            page.screenshot(path=str(target), full_page=True)
            if palette:
                _to_palette(target)
            written.append(target)
    return written


def _to_palette(png: Path) -> None:
    """Rewrite a screenshot as a 256-colour PNG."""
    from PIL import Image

    with Image.open(png) as image:
        reduced = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    reduced.save(png, optimize=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the app on the given runs and screenshot every view."""
    parser = argparse.ArgumentParser(prog="python tests/apps/browser.py", description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", nargs="*", type=Path, metavar="RUN_DIR")
    parser.add_argument("--root", type=Path, default=Path("runs"))
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    parser.add_argument("--query", default="", help="URL query for every view, e.g. run=A&baseline=B")
    parser.add_argument("--width", type=int, default=1600)
    parser.add_argument("--views", nargs="*", default=None, metavar="VIEW",
                        help=f"views to capture (default: all): {' '.join(name for _, name, _ in VIEWS)}")
    parser.add_argument("--palette", action="store_true", help="save 256-colour PNGs (smaller, for docs)")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if not CHROMIUM.exists():
        print(f"{CHROMIUM} is missing: apt-get install -y chromium", file=sys.stderr)
        return 2
    with running_app(args.run_dirs, args.root) as url:
        for path in capture_views(url, args.out, width=args.width, query=args.query, views=args.views,
                                  palette=args.palette):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
