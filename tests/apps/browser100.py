"""Helpers of the browser tests at the generated root of 117 run candidates (``root100``):
``test_app_browser100.py`` and ``test_app_browser100_csv.py``.

Serve the app on the root, open a view, change a widget as a user does (a select box, a
multiselect, the sidebar's baseline and chart options), download a chart's CSV, and read a
run's logged files back as numpy arrays, with the arithmetic the tests recompute the charts
with (the sidebar's EMA smoothing, the wall clock) written here again, apart from the app's.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence
from urllib.parse import parse_qs, quote, urlsplit

import numpy as np

import browser
from apps.views import interactive

CHART = '[data-testid="stVegaLiteChart"]'
TIMEOUT_S = browser.PATIENCE_S  # a hang guard, not a speed check (browser.PATIENCE_S)
#: How close a CSV value must be to the value recomputed from the run's files: the CSV writes 10
#: significant digits (``%.10g``).
RTOL = ATOL = 5e-10
#: How long a widget's effect may take to show before the action is tried again (milliseconds).
WAIT_MS = 30_000


# ----------------------------------------------------------------------------- the app and a page

@contextlib.contextmanager
def serve(root: Path, log: Path) -> Iterator[str]:
    """The app on ``root`` (SVG renderer, so that marks, titles and legends can be read from the DOM)."""
    with browser.running_app([], root, timeout_s=TIMEOUT_S, log_file=log,
                             env={interactive.RENDERER_ENV: "svg"}) as url:
        yield url


@contextlib.contextmanager
def new_page() -> Iterator[Any]:
    """A Chromium page, 1600 x 1200, with the tests' timeout."""
    with browser.chromium_page(width=1600, height=1200) as opened:
        opened.set_default_timeout(TIMEOUT_S * 1000)
        yield opened


def open_view(page: Any, url: str, title: str, charts: int = 1) -> None:
    """Go to ``url`` and wait until the view ``title`` has drawn ``charts`` charts and settled."""
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_function("""(title) => { const h = document.querySelector('[data-testid="stMain"] h1');
                                          return h && h.innerText.trim() === title; }""", arg=title)
    browser.wait_for_view(page, min_charts=charts, timeout_s=TIMEOUT_S)
    assert browser.error_texts(page) == []


def main_text(page: Any) -> str:
    return str(page.locator('[data-testid="stMain"]').inner_text())


def query(key: str, labels: Sequence[str]) -> str:
    """``key=a&key=b`` for a URL, each label quoted."""
    return "&".join(f"{key}={quote(label, safe='')}" for label in labels)


def settle(page: Any, charts: int = 0) -> None:
    """Wait until the rerun that a click started has finished (no element left stale) and the
    page stopped changing."""
    page.wait_for_timeout(500)
    page.wait_for_function("""() => !document.querySelector('[data-stale="true"]')""")
    browser.wait_for_view(page, min_charts=charts, timeout_s=TIMEOUT_S)


def wait_for_url(page: Any, part: str, timeout_ms: float | None = None) -> None:
    """Wait until the page's URL holds ``part`` (a widget bound to the URL took its new value)."""
    page.wait_for_function("(part) => decodeURIComponent(window.location.search.replace(/\\+/g, ' ')).includes(part)",
                           arg=part, timeout=timeout_ms)


def assert_in_url(page: Any, values: Mapping[str, str]) -> None:
    """The page's URL holds each widget's value (``key``: value), so that a copied link keeps them."""
    held = {key: ",".join(value) for key, value in parse_qs(urlsplit(page.url).query).items()}
    assert {key: held.get(key) for key in values} == dict(values), page.url


def widget(page: Any, key: str) -> Any:
    """The widget with the key ``key`` (Streamlit gives its container the class ``st-key-<key>``),
    not the stale copy a rerun may leave on the page for a moment."""
    return page.locator(f'.st-key-{key}:not([data-stale="true"])').first


def _open_list(page: Any, box: Any) -> None:
    """Open a select box's list: a click, and the down arrow when the click only focused it (a
    click on a box at the bottom of the sidebar may not open its list)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    box.get_by_role("combobox").click()
    try:
        page.get_by_role("option").first.wait_for(timeout=1_000)
    except PlaywrightTimeout:
        page.keyboard.press("ArrowDown")


#: What shows that a widget took its new value: a text on the page, ``?part`` of the URL, or a
#: function that waits for it (the URL does not always follow a widget: see :func:`move_slider`).
Shown = str | Callable[[], None]


def _wait_shown(page: Any, shown: Shown) -> None:
    """Wait until the page shows ``shown``: a text, or when it starts with ``?`` the rest in the URL,
    or what a function waits for."""
    if callable(shown):
        shown()
    elif shown.startswith("?"):
        wait_for_url(page, shown[1:], WAIT_MS)
    else:
        page.get_by_text(shown, exact=False).first.wait_for(timeout=WAIT_MS)


def _until_shown(page: Any, act: Callable[[], None], shown: Shown) -> None:
    """``act`` (a user's action on a widget), then wait until the page shows ``shown``
    (:func:`_wait_shown`); done again when a rerun replaced the widget meanwhile, or a list stayed open."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for attempt in range(3):
        try:
            act()
            _wait_shown(page, shown)
            break
        except PlaywrightTimeout:
            if attempt == 2:
                raise
            page.keyboard.press("Escape")
            settle(page)
    settle(page)


def choose(page: Any, key: str, option: str, shown: Shown, search: bool = False) -> None:
    """Pick ``option`` in the select box ``key`` (as a user does: open it, click the option;
    ``search``: type the option first, for long lists), then wait until the page shows ``shown``
    (:func:`_wait_shown`)."""

    def act() -> None:
        _open_list(page, widget(page, key))
        if search:
            page.keyboard.type(option)
        page.get_by_role("option", name=option, exact=True).click(timeout=WAIT_MS)

    _until_shown(page, act, shown)


def add_option(page: Any, key: str, option: str, shown: Shown, clear: bool = False) -> None:
    """Add ``option`` to the multiselect ``key`` (``clear``: remove its options first), then wait
    until the page shows ``shown`` (:func:`_wait_shown`)."""
    if clear:
        widget(page, key).get_by_role("button", name="Clear all").click()
        settle(page)

    def act() -> None:
        _open_list(page, widget(page, key))
        page.keyboard.type(option)
        page.get_by_role("option", name=option, exact=True).click(timeout=WAIT_MS)
        page.keyboard.press("Escape")

    _until_shown(page, act, shown)


def choose_baseline(page: Any, name: str) -> None:
    """Pick the baseline (side by side) by its name in the sidebar."""
    choose(page, "baseline", name, f"Baseline: {name}", search=True)


def move_slider(page: Any, key: str, presses: Sequence[str], shown: Shown | None = None) -> str:
    """Focus the slider ``key`` and press ``presses`` (``ArrowLeft``, ``PageUp``...), then wait
    until the page shows ``shown`` (default: the slider's value in the URL); returns the value the
    slider shows."""

    def act() -> None:
        slider = widget(page, key).get_by_role("slider")
        slider.focus()
        for press in presses:
            slider.press(press)

    _until_shown(page, act, shown or f"?{key}=")
    return str(widget(page, key).get_by_role("slider").get_attribute("aria-valuetext"))


WALL = "wall clock"


def chart_options(page: Any, ema_pages: int = 3, colours: bool = False, x_shown: str | None = None) -> float:
    """Change the sidebar's chart options from their defaults: EMA smoothing ``ema_pages`` tenths
    (PageUp), log y-scale on, the wall clock as x axis (then wait until the page shows
    ``x_shown``; default: until a chart's x axis is the wall clock) and, with ``colours``, the
    heatmaps' natural colour range; returns the EMA weight."""
    page.get_by_test_id("stSidebar").get_by_text("Chart options").click()
    weight = float(move_slider(page, "ema", ["PageUp"] * ema_pages))
    _until_shown(page, lambda: widget(page, "log_y").get_by_text("Log y-scale").click(), "?log_y=true")
    if colours:
        choose(page, "colours", "natural range", "?colours=natural range")
    choose(page, "x", WALL, x_shown or f"?x={WALL}")
    if x_shown is None:
        wait_for_svg_text(page, f"{WALL} (", "axis-title")
    return weight


def download(page: Any, index: int = 0) -> list[dict[str, str]]:
    """The rows of the ``index``-th "Chart data (CSV)" download of the page; clicked again when
    nothing came (a click during a rerun asks for the file of the run before, which is gone)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for attempt in range(3):
        try:
            with page.expect_download(timeout=20_000) as download:
                page.get_by_role("button", name="Chart data (CSV)").nth(index).click()
            return list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))
        except PlaywrightTimeout:
            if attempt == 2:
                raise
            settle(page)
    raise AssertionError("unreachable")


def wait_for_svg_text(page: Any, text: str, role: str = "title", count: int = 1) -> None:
    """Wait until ``count`` of the drawn charts' titles (or ``role``: ``axis-title``,
    ``legend-title``) start with ``text``."""
    page.wait_for_function("""([selector, role, text, count]) => Array.from(document.querySelectorAll(
        selector + ' g.role-' + role + ' text')).filter(node => node.textContent.startsWith(text)).length >= count""",
                           arg=[CHART, role, text, count], timeout=WAIT_MS)


def svg_texts(page: Any, role: str = "title") -> list[str]:
    """Texts of the drawn charts' titles (``role`` ``title``), axis titles (``axis-title``),
    legend titles (``legend-title``) or legend entries (``legend-label``)."""
    return list(page.evaluate("""([selector, role]) => Array.from(document.querySelectorAll(
        selector + ' g.role-' + role + ' text')).map(node => node.textContent)""", [CHART, role]))


# ----------------------------------------------------------------------------- a run's files

def steps(root: Path, label: str) -> list[dict[str, Any]]:
    """A run's steps.jsonl records."""
    lines = (root / label / "steps.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def evals(root: Path, label: str) -> list[dict[str, Any]]:
    """A run's eval.jsonl records."""
    lines = (root / label / "eval.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def config(root: Path, label: str) -> dict[str, Any]:
    return dict(json.loads((root / label / "config.json").read_text()))


def scalar(records: Sequence[dict[str, Any]], name: str) -> np.ndarray:
    """A scalar per step, NaN where it is null or missing."""
    return np.array([np.nan if record["scalars"].get(name) is None else record["scalars"][name]
                     for record in records], dtype=float)


def bins(records: Sequence[dict[str, Any]], field: str) -> np.ndarray:
    """A per-bin field, shape (steps, bins), NaN where null."""
    return np.array([[np.nan if value is None else value for value in record["bins"][field]] for record in records],
                    dtype=float)


def logged_steps(records: Sequence[dict[str, Any]]) -> np.ndarray:
    return np.array([record["step"] for record in records], dtype=float)


def elapsed(records: Sequence[dict[str, Any]]) -> np.ndarray:
    """Seconds since the start at each logged step: time/step (+ time/eval) summed over the steps
    since the previous logged one."""
    step_T = logged_steps(records)
    seconds_T = np.nan_to_num(scalar(records, "time/step")) + np.nan_to_num(scalar(records, "time/eval"))
    return np.cumsum(seconds_T * np.maximum(np.diff(step_T, prepend=step_T[0] - 1), 1))


def ema(values: np.ndarray, weight: float) -> np.ndarray:
    """TensorBoard's debiased EMA over the finite values (NaN stays NaN), as a matrix product:
    s_n = (1 − w) Σ_{k≤n} w^{n−k} x_k / (1 − w^n) over the n-th finite value."""
    values = np.asarray(values, dtype=float)
    finite = np.isfinite(values)
    x = values[finite]
    n = np.arange(1, x.size + 1)
    powers = np.tril(weight ** np.subtract.outer(n, n).clip(min=0))
    out = values.copy()
    out[finite] = (1 - weight) * (powers @ x) / (1 - weight ** n)
    return out


# ----------------------------------------------------------------------------- a CSV's rows

def rows_of(rows: Sequence[dict[str, str]], chart: str, order: str | None = None, **where: str) -> list[dict[str, str]]:
    """The rows of one chart (and with ``where`` columns equal to values), sorted by the number in ``order``."""
    chosen = [row for row in rows if row["chart"] == chart and all(row[key] == value for key, value in where.items())]
    return sorted(chosen, key=lambda row: float(row[order])) if order else chosen


def column(rows: Sequence[dict[str, str]], name: str) -> np.ndarray:
    """A CSV column as floats (blank: NaN)."""
    assert not rows or name in rows[0], f"the CSV has no column {name!r}: {list(rows[0])}"
    return np.array([float(row[name]) if row[name] != "" else np.nan for row in rows], dtype=float)


def assert_close(actual: np.ndarray, expected: np.ndarray, what: str = "") -> None:
    """Equal to the CSV's 10 significant digits; NaN (a blank cell) where NaN is expected."""
    assert np.shape(actual) == np.shape(expected), f"{what}: {np.shape(actual)} rows, expected {np.shape(expected)}"
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL, equal_nan=True, err_msg=what)
