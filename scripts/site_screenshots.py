"""Screenshots of the built docs site: the landing page, the concept page and the launch page.

Builds the site with mkdocs into a temporary folder (or takes one already built), serves it on a free
port of 127.0.0.1 with Python's ``http.server``, opens each page in Debian's headless Chromium through
Playwright (the browser the app's tests use; ``GDRO_CHROMIUM`` names another binary) and writes one PNG
per page::

    python scripts/site_screenshots.py                        # -> docs/screenshots/site-{index,concepts,launch}.png
    python scripts/site_screenshots.py --site SITE --out DIR   # an already built site; another folder

Needs the ``docs`` extra (mkdocs) and Playwright with Chromium. Every wait is bounded and the server is
always stopped. A page that does not load, or a missing browser, is one line on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path(os.environ.get("GDRO_CHROMIUM", "/usr/bin/chromium"))
#: (page of the site, file name, height of the shot in pixels: the top of the page, where a reader lands).
PAGES = (("", "site-index.png", 1000), ("concepts/", "site-concepts.png", 1400), ("launch/", "site-launch.png", 1000))
WIDTH = 1400
#: A guard against a hang, not a speed check: the site is static and loads in well under a second.
PATIENCE_S = 120.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def build_site(out: Path) -> None:
    """``mkdocs build --strict`` of this checkout into ``out``."""
    mkdocs = [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)]
    result = subprocess.run(mkdocs, cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"site_screenshots: mkdocs build failed: {result.stderr.strip().splitlines()[-1:]}")


@contextlib.contextmanager
def served(site: Path) -> Iterator[str]:
    """The site served on 127.0.0.1; yields its base URL, stops the server on exit."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                               "--directory", str(site)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + PATIENCE_S
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"site_screenshots: the server on {url} did not start") from None
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def screenshot(url: str, out: Path) -> list[Path]:
    """One PNG per page of PAGES under ``out``; returns the files written."""
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.is_file():
        raise SystemExit(f"site_screenshots: no Chromium at {CHROMIUM}: install Debian's chromium "
                         "or set GDRO_CHROMIUM to a Chromium binary")
    written = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                             args=["--headless", "--no-sandbox", "--disable-gpu"])
        try:
            for path, name, height in PAGES:
                page = browser.new_page(viewport={"width": WIDTH, "height": height})
                page.set_default_timeout(PATIENCE_S * 1000)
                response = page.goto(url + path, wait_until="load")
                if response is None or not response.ok:
                    raise SystemExit(f"site_screenshots: {url + path} answered "
                                     f"{response.status if response else 'nothing'}")
                page.wait_for_selector("article h1")
                # every image of the page decoded, so the shot never shows a half-loaded figure
                page.wait_for_function("() => [...document.images].every(i => i.complete && i.naturalWidth > 0)")
                target = out / name
                page.screenshot(path=str(target))
                written.append(target)
                page.close()
        finally:
            browser.close()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, help="an already built site (default: build one into a temporary folder)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots", help="folder of the PNGs")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gdro-site-") as scratch:
        site = args.site
        if site is None:
            site = Path(scratch) / "site"
            build_site(site)
        elif not (site / "index.html").is_file():
            print(f"site_screenshots: --site {site}: no index.html there (build it with mkdocs build -d {site})",
                  file=sys.stderr)
            return 1
        with served(site) as url:
            for path in screenshot(url, args.out):
                print(f"site_screenshots: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
