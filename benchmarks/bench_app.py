"""Benchmark: how fast each view of the app renders on a long study (1,000 steps x 10 bins x 3 runs).

Writes three synthetic runs (GRPO, Prompt-GDRO, Rollout-GDRO; the writer of the app's tests),
then measures, per view, with the Prompt-GDRO run shown next to the GRPO baseline (Compare: all
three runs):

* script time (AppTest, no browser): the first run of the view in a fresh session, when the
  runs are read from disk ("cold"), and a rerun with the cache filled ("warm");
* browser time (Debian's headless Chromium, if installed): from clicking the view in the
  sidebar until its last chart is drawn, on the first visit and (median) on later visits.

Then, on a second study of 4 methods x 5 seeds x 1,000 steps (real-run extras: step times and
per-benchmark evaluations), the Study view (bands over seeds, final table) the same way, and the
first page after the server starts (from starting ``gdro app`` until the landing page, the run table,
is drawn, and from the first request alone; then the same for Traveling wave opened directly).

Then, on a root of ``--many`` runs (default 100: 4 methods x 5 learning-rate scales x 5 seeds, in
the simulator's ``<method>/lr<scale>/seed<k>`` layout, ``--many-steps`` steps each), the first page
(the run table) from the request: the script alone (AppTest, cold and warm) and in the browser
after a fresh start (issue 21: <= 3 s from the request on a quiet machine).

Then, on a user-like root (tests/apps/root100.py: a 100-run ``gdro simulate`` study, a 12-run
``gdro sweep``, 3 trainer-layout runs, a truncated run, a newer-format run and a folder that is not
a run), the Runs page and the Study view: the first visit of a fresh server and a second visit
(another tab), on a quiet machine and under ``--load`` busy processes.

Targets (issue 11): every page <= 2 s on the first visit and <= 1 s later on 3 x 1,000-step runs;
the Study view on 5 seeds x 4 methods <= 3 s; the first page after start <= 3 s. This is a
benchmark that prints tables, not a test: nothing asserts on the numbers.

    python benchmarks/bench_app.py [--steps 1000] [--bins 10] [--seeds 5] [--starts 5] [--no-browser]
    python benchmarks/bench_app.py --only many [--many 100] [--many-steps 400]   # the 100-run root alone
    python benchmarks/bench_app.py --only root100 [--starts 3] [--load 2]       # first and second visit, 116 runs
    python benchmarks/bench_app.py --only scale [--starts 3] [--load 2]         # 100 and 1,000 runs: the speed table

The ``scale`` part (issue 44) times, on the 116-run root of tests/apps/root100.py and on the arena-shaped
root of tests/apps/root1000.py (1,020 simulator + 150 trainer runs, 4 damaged folders, an empty one), the
Runs page's first visit (a fresh server) and second visit (a new session of that server), and Compare
with :data:`PICKED` runs picked (``?pick=`` in the URL, a new session after the Runs visits), each from
the request until drawn; quiet, then under ``--load`` busy ``sh -c 'while :; do :; done'`` processes.
Targets on a quiet 2-core machine: first visit < 3 s, second < 1.5 s, 50 runs drawn < 3 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "apps"))

import browser  # noqa: E402  (tests/apps/browser.py, on the path above)
from gdro_app_synthetic import write_synthetic_run  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from apps.data import loading  # noqa: E402
from apps.data.settings import ROOT_ENV, RUNS_ENV  # noqa: E402

METHODS = ("grpo", "prompt_gdro", "rollout_gdro")
VIEW_FILES = {"traveling-wave": "traveling_wave", "study": "study", "lead-lag": "lead_lag",
              "rollout-budget": "rollout_budget", "se-proxy": "se_proxy", "outcomes": "outcomes", "compare": "compare",
              "evaluations": "evaluations", "step-time": "step_time", "runs": "runs", "config": "config"}
STUDY_METHODS = ("grpo", "prompt_gdro", "rollout_gdro", "both")
QUERY = "run=prompt_gdro&baseline=grpo"


def write_study(root: Path, steps: int, bins: int) -> float:
    """Three runs of one synthetic study under ``root``; returns seconds spent writing."""
    start = time.perf_counter()
    for seed, method in enumerate(METHODS):
        write_synthetic_run(root / method, steps=steps, num_bins=bins, seed=seed, method=method, eval_every=50)
    return time.perf_counter() - start


def write_seed_study(root: Path, steps: int, bins: int, seeds: int) -> float:
    """4 methods x ``seeds`` seeds with real-run extras under ``root/<method>/seed<k>``; seconds spent."""
    start = time.perf_counter()
    for method in STUDY_METHODS:
        for seed in range(seeds):
            write_synthetic_run(root / method / f"seed{seed}", steps=steps, num_bins=bins, seed=seed, method=method,
                                eval_every=50, real=True)
    return time.perf_counter() - start


def study_browser_times(root: Path, rounds: int) -> tuple[float, float, int]:
    """(first visit s, median later visit s, charts) of the Study view in headless Chromium."""
    times = []
    with browser.running_app([], root) as url, browser.chromium_page(width=1600, height=1200) as page:
        page.goto(url, wait_until="domcontentloaded")
        browser.wait_for_run_table(page, timeout_s=180)  # app load: not timed
        for _round in range(rounds):
            times.append(browser.open_view_from_sidebar(page, "Study", timeout_s=180))
            problems = browser.error_texts(page)
            if problems:
                raise RuntimeError(f"study: the page shows an error: {problems}")
            browser.open_view_from_sidebar(page, "Config", timeout_s=180)
        drawn = browser.drawn_charts(page)
    return times[0], statistics.median(times[1:]) if len(times) > 1 else times[0], drawn


def startup_times(root: Path, path: str = "", min_charts: int = 0, query: str = QUERY) -> tuple[float, float]:
    """(s from starting ``gdro app`` until the page at ``path`` is drawn, s from the first request
    alone) on a freshly started server, in a browser that is already open (as a user's is; the
    headless browser's own launch is not the app's start). The landing page (``path`` "") is
    the run table: drawn means a cell of its table is on screen; a chart page is drawn when its
    last chart appeared. Either way the page must then settle (script finished, nothing new drawn
    for 0.3 s), but that quiet period is not counted."""
    with browser.chromium_page(width=1600, height=1200) as page:
        start = time.monotonic()
        with browser.running_app([], root, timeout_s=180) as url:
            served = time.monotonic()
            page.goto(f"{url}/{path}" + (f"?{query}" if query else ""), wait_until="domcontentloaded")
            if min_charts:
                waited = time.monotonic()
                done = waited + browser.wait_for_view(page, min_charts=min_charts, timeout_s=180)
            else:
                page.wait_for_selector(browser.RUN_TABLE_SELECTOR, timeout=180_000)
                done = time.monotonic()
                browser.wait_for_run_table(page, timeout_s=180)
            problems = browser.error_texts(page)
            if problems:
                raise RuntimeError(f"first page after start: the page shows an error: {problems}")
    return done - start, done - served


def _session(root: Path, query: bool = True) -> AppTest:
    """A fresh app session on the study, showing Prompt-GDRO next to the GRPO baseline (``query``)."""
    os.environ[ROOT_ENV] = str(root)
    os.environ.pop(RUNS_ENV, None)
    app = AppTest.from_file(str(REPO / "apps" / "streamlit_app.py"), default_timeout=120)
    if query:
        app.query_params["run"], app.query_params["baseline"] = "prompt_gdro", "grpo"
    return app


def script_times(root: Path) -> dict[str, tuple[float, float, int]]:
    """Per view: (cold s, warm s, charts) of the Streamlit script under AppTest."""
    import streamlit as st

    results = {}
    for name, file in VIEW_FILES.items():
        app = _session(root)
        app.run()  # the landing page: loads the app; not timed
        app.switch_page(f"views/{file}.py")
        if name == "compare":
            app.run()
            app.multiselect(key="compare-runs").set_value(list(METHODS))
        if name == "study":
            app.run()
        st.cache_data.clear()  # cold: the runs are read from disk again, every chart is built again
        loading.RUN_CACHE.clear()
        start = time.perf_counter()
        app.run()
        cold = time.perf_counter() - start
        start = time.perf_counter()
        app.run()
        warm = time.perf_counter() - start
        problems = [element.value for element in [*app.exception, *app.error]]
        if problems:
            raise RuntimeError(f"{name}: the view failed: {problems}")
        results[name] = (cold, warm, len(app.get("vega_lite_chart")))
    return results


def browser_times(root: Path, rounds: int) -> dict[str, tuple[float, float, int]]:
    """Per view: (first visit s, median of the later visits s, charts drawn) in headless Chromium.

    The app is loaded once; then each view is opened from the sidebar as a user does, in
    ``rounds`` rounds over all views, and timed from the click to its last chart.
    """
    visits: dict[str, list[float]] = {name: [] for _, name, _ in browser.VIEWS}
    drawn: dict[str, int] = {}
    with browser.running_app([], root) as url, browser.chromium_page(width=1600, height=1200) as page:
        page.goto(f"{url}/lead-lag?{QUERY}", wait_until="domcontentloaded")
        browser.wait_for_view(page, min_charts=1, timeout_s=120)  # app load: not timed
        for _round in range(rounds):
            for _url_path, name, title in browser.VIEWS:
                visits[name].append(browser.open_view_from_sidebar(page, title, timeout_s=120))
                problems = browser.error_texts(page)
                if problems:
                    raise RuntimeError(f"{name}: the page shows an error: {problems}")
                drawn[name] = browser.drawn_charts(page)
    return {name: (times[0], statistics.median(times[1:]) if len(times) > 1 else times[0], drawn[name])
            for name, times in visits.items()}


def print_table(title: str, columns: tuple[str, str], rows: dict[str, tuple[float, float, int]],
                limits: tuple[float, float] = (2.0, 1.0)) -> None:
    """A Markdown table: view, the two timings, charts, and whether each is within its target."""
    print(f"\n{title}\n")
    print(f"| view | {columns[0]} (s) | {columns[1]} (s) | charts | first <= {limits[0]:g} s | later <= {limits[1]:g} s |")
    print("|---|---:|---:|---:|:---:|:---:|")
    for name, (first, second, charts) in rows.items():
        print(f"| {name} | {first:.2f} | {second:.2f} | {charts} | {'yes' if first <= limits[0] else 'NO'} | "
              f"{'yes' if second <= limits[1] else 'NO'} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--bins", type=int, default=10)
    parser.add_argument("--no-browser", action="store_true", help="skip the Chromium measurements")
    parser.add_argument("--rounds", type=int, default=4, help="rounds over all views in the browser")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per method of the Study benchmark")
    parser.add_argument("--starts", type=int, default=5, help="fresh servers timed for the first page after start")
    parser.add_argument("--many", type=int, default=100, help="runs under the root of the many-runs part")
    parser.add_argument("--many-steps", type=int, default=400, help="steps of each run of the many-runs part")
    parser.add_argument("--root100", default=None, help="an existing root100 folder to time (default: build one)")
    parser.add_argument("--load", type=int, default=2, help="busy processes of the loaded root100 measurement")
    parser.add_argument("--root1000", default=None, help="an existing root1000 folder to time (default: build one)")
    parser.add_argument("--sizes", default="100,1000", help="roots of the scale part: 100 (root100), 1000 (root1000)")
    parser.add_argument("--only", choices=("views", "study", "many", "root100", "scale"), default=None,
                        help="run only the per-view part (3 runs), the Study part (4 methods x seeds) or the "
                             "first page on a root of --many runs")
    args = parser.parse_args(argv)
    if args.only in (None, "views"):
        views_part(args)
    if args.only in (None, "study"):
        study_part(args)
    if args.only in (None, "many"):
        many_part(args)
    if args.only in (None, "root100"):
        root100_part(args)
    if args.only in (None, "scale"):
        scale_part(args)
    return 0


def views_part(args: argparse.Namespace) -> None:
    """Script and browser time per view on 3 runs, and the first page after start."""
    with tempfile.TemporaryDirectory(prefix="bench-app-") as folder:
        root = Path(folder)
        written = write_study(root, args.steps, args.bins)
        size = sum(file.stat().st_size for file in root.rglob("*") if file.is_file())
        print(f"study: {len(METHODS)} runs x {args.steps} steps x {args.bins} bins "
              f"({size / 1e6:.1f} MB on disk, written in {written:.1f} s); cpus: {os.cpu_count()}")
        print_table("Script time per view (AppTest; run + baseline side by side, Compare: 3 runs)",
                    ("cold", "warm"), script_times(root), limits=(2.0, 1.0))
        if args.no_browser:
            return
        if not browser.CHROMIUM.exists():
            print(f"\n(browser timings skipped: {browser.CHROMIUM} is missing)")
            return
        print_table("Browser time per view (headless Chromium, sidebar click until the last chart is drawn)",
                    ("first visit", f"median of {args.rounds - 1} later visits"), browser_times(root, args.rounds))
        starts = [startup_times(root) for _ in range(args.starts)]
        print(f"\nFirst page after start ({args.starts} fresh servers; median, then each): "
              f"{_median_of(starts, 0)} s from starting `gdro app` until the landing page's run table is on "
              f"screen (browser already open); {_median_of(starts, 1)} s from the first request")
        starts = [startup_times(root, "traveling-wave", min_charts=1) for _ in range(args.starts)]
        print(f"Traveling wave opened directly as the first page after start: {_median_of(starts, 0)} s until "
              f"its charts are drawn; {_median_of(starts, 1)} s from the first request")


def _median_of(pairs: list[tuple[float, float]], index: int) -> str:
    """'median (a, b, c)' of one column of (from start, from request) pairs, in seconds."""
    values = [pair[index] for pair in pairs]
    return f"{statistics.median(values):.2f} ({', '.join(f'{value:.2f}' for value in values)})"


def study_part(args: argparse.Namespace) -> None:
    """The Study view on 4 methods x ``args.seeds`` seeds."""
    with tempfile.TemporaryDirectory(prefix="bench-study-") as folder:
        root = Path(folder)
        written = write_seed_study(root, args.steps, args.bins, args.seeds)
        print(f"\nstudy: {len(STUDY_METHODS)} methods x {args.seeds} seeds x {args.steps} steps x {args.bins} bins "
              f"(written in {written:.1f} s)")
        if browser.CHROMIUM.exists() and not args.no_browser:
            first, later, drawn = study_browser_times(root, 3)
            print_table("Study view (bands over seeds + final table), headless Chromium", ("first visit", "later"),
                        {"study": (first, later, drawn)}, limits=(3.0, 3.0))


LR_SCALES = (0.25, 0.5, 1.0, 2.0, 4.0)


def write_many(root: Path, count: int, steps: int, bins: int) -> float:
    """``count`` runs in the simulator's layout (methods x lr scales x seeds, in that order); seconds."""
    start = time.perf_counter()
    written = 0
    for method in STUDY_METHODS:
        for lr_scale in LR_SCALES:
            for seed in range(5):
                if written == count:
                    return time.perf_counter() - start
                write_synthetic_run(root / method / f"lr{lr_scale:g}" / f"seed{seed}", steps=steps, num_bins=bins,
                                    seed=seed, method=method, eval_every=50, lr_scale=lr_scale)
                written += 1
    while written < count:  # more than 4 x 5 x 5: extra seeds
        write_synthetic_run(root / "extra" / f"seed{written}", steps=steps, num_bins=bins, seed=written, eval_every=50)
        written += 1
    return time.perf_counter() - start


def landing_script_times(root: Path, repeats: int = 3) -> tuple[float, float, int]:
    """(cold s, median warm s, table rows) of the landing page's script under AppTest: cold = every
    cache cleared (the run list read from disk), warm = a rerun."""
    import streamlit as st

    from apps.data import listing

    app = _session(root, query=False)
    st.cache_data.clear()
    loading.RUN_CACHE.clear()
    listing.INFO_CACHE.clear()
    start = time.perf_counter()
    app.run()
    cold = time.perf_counter() - start
    warm = []
    for _ in range(repeats):
        start = time.perf_counter()
        app.run()
        warm.append(time.perf_counter() - start)
    problems = [element.value for element in [*app.exception, *app.error]]
    if problems:
        raise RuntimeError(f"landing page on many runs: {problems}")
    rows = max((len(element.value) for element in app.dataframe), default=0)
    return cold, statistics.median(warm), rows


def many_part(args: argparse.Namespace) -> None:
    """The first page (the run table) on a root of ``args.many`` runs."""
    with tempfile.TemporaryDirectory(prefix="bench-many-") as folder:
        root = Path(folder)
        written = write_many(root, args.many, args.many_steps, args.bins)
        size = sum(file.stat().st_size for file in root.rglob("*") if file.is_file())
        print(f"\nroot of {args.many} runs x {args.many_steps} steps x {args.bins} bins ({size / 1e6:.1f} MB, "
              f"written in {written:.1f} s)")
        cold, warm, rows = landing_script_times(root)
        print(f"Landing page script (AppTest): cold {cold:.2f} s (run list read from disk), warm {warm:.2f} s; "
              f"{rows} rows in the run table")
        if browser.CHROMIUM.exists() and not args.no_browser:
            starts = [startup_times(root, query="") for _ in range(args.starts)]
            print(f"First page after start on {args.many} runs ({args.starts} fresh servers; median, then each): "
                  f"{_median_of(starts, 1)} s from the first request until the run table is on screen; "
                  f"{_median_of(starts, 0)} s from starting `gdro app`")


def _busy(count: int) -> list[subprocess.Popen[bytes]]:
    """``count`` processes that keep a CPU core busy (a loaded machine), until stopped."""
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(count)]


def two_visits(root: Path, path: str = "", min_charts: int = 0) -> tuple[float, float]:
    """(first visit s, second visit s) from the request until the page at ``path`` is drawn, on a
    freshly started server: the first in a browser that has never opened the app, the second after
    leaving the app and opening it again (a new session of the same server, the browser's cache warm)."""

    def visit(page: Any, url: str) -> float:
        start = time.monotonic()
        page.goto(f"{url}/{path}", wait_until="domcontentloaded")
        if min_charts:
            done = time.monotonic() + browser.wait_for_view(page, min_charts=min_charts, timeout_s=180)
        else:
            page.wait_for_selector(browser.RUN_TABLE_SELECTOR, timeout=180_000)
            done = time.monotonic()
            browser.wait_for_run_table(page, timeout_s=180)
        problems = browser.error_texts(page)
        if problems:
            raise RuntimeError(f"{path or 'runs'}: the page shows an error: {problems}")
        return done - start

    with browser.chromium_page(width=1600, height=1200) as page, browser.running_app([], root, timeout_s=180) as url:
        first = visit(page, url)
        page.goto("about:blank")  # leave the app: the next visit is a new session
        second = visit(page, url)
    return first, second


def root100_part(args: argparse.Namespace) -> None:
    """The first and second visit of the Runs page (and of Study) on a user-like root of 116 runs
    (tests/apps/root100.py), on a quiet machine and under ``args.load`` busy processes."""
    from root100 import build_root

    with tempfile.TemporaryDirectory(prefix="bench-root100-") as folder:
        root = Path(args.root100) if args.root100 else Path(folder) / "root"
        if not args.root100:
            start = time.perf_counter()
            built = build_root(root)
            print(f"\nroot of {len(built.readable)} runs (tests/apps/root100.py), built in "
                  f"{time.perf_counter() - start:.1f} s; cpus: {os.cpu_count()}; load average before: "
                  f"{', '.join(f'{value:.1f}' for value in os.getloadavg())}")
        for load in (0, args.load):
            busy = _busy(load)
            try:
                for path, charts, name in (("", 0, "Runs (landing page)"), ("study", 1, "Study (first study)")):
                    pairs = [two_visits(root, path, charts) for _ in range(args.starts)]
                    print(f"{name}, {load} busy processes ({args.starts} fresh servers; median, then each): first "
                          f"visit {_median_of(pairs, 0)} s, second visit {_median_of(pairs, 1)} s from the request")
            finally:
                for process in busy:
                    process.kill()
                    process.wait()


#: Runs picked for the many-runs view of the scale part.
PICKED = 50


def picked_view(url: str, labels: Sequence[str], path: str = "compare") -> float:
    """Seconds from the request of ``path`` with ``labels`` picked (``?pick=`` in the URL, a new
    session) until its charts are drawn and settled."""
    query = urllib.parse.urlencode([("pick", label) for label in labels])
    with browser.chromium_page(width=1600, height=1200) as page:
        start = time.monotonic()
        page.goto(f"{url}/{path}?{query}", wait_until="domcontentloaded")
        done = time.monotonic() + browser.wait_for_view(page, min_charts=1, timeout_s=300)
        problems = browser.error_texts(page)
        if problems:
            raise RuntimeError(f"{path} with {len(labels)} runs: the page shows an error: {problems}")
    return done - start


def scale_visits(root: Path, labels: Sequence[str]) -> tuple[float, float, float]:
    """(first visit, second visit of the Runs page, Compare with ``labels`` picked) in seconds from
    the request, on one freshly started server."""
    with browser.running_app([], root, timeout_s=300) as url:
        with browser.chromium_page(width=1600, height=1200) as page:
            times = []
            for _visit in range(2):
                start = time.monotonic()
                page.goto(url, wait_until="domcontentloaded")
                page.wait_for_selector(browser.RUN_TABLE_SELECTOR, timeout=300_000)
                times.append(time.monotonic() - start)
                browser.wait_for_run_table(page, timeout_s=300)
                problems = browser.error_texts(page)
                if problems:
                    raise RuntimeError(f"runs: the page shows an error: {problems}")
                page.goto("about:blank")  # leave the app: the next visit is a new session
        return times[0], times[1], picked_view(url, labels)


def scale_roots(args: argparse.Namespace, folder: Path) -> dict[int, tuple[Path, list[str]]]:
    """Size -> (root, the :data:`PICKED` runs to draw): the 116-run root and the arena-shaped one."""
    from root100 import build_root as build_root100
    from root1000 import build_root as build_root1000

    roots: dict[int, tuple[Path, list[str]]] = {}
    sizes = {int(size) for size in args.sizes.split(",")}
    if 100 in sizes:
        root = Path(args.root100) if args.root100 else folder / "root100"
        study = sorted(path.parent.relative_to(root).as_posix() for path in (root / "study").rglob("meta.json")) \
            if args.root100 else list(build_root100(root).study)
        roots[100] = (root, study[:PICKED])
    if 1000 in sizes:
        root = Path(args.root1000) if args.root1000 else folder / "root1000"
        start = time.perf_counter()
        simulator = sorted(path.parent.relative_to(root).as_posix() for path in (root / "runs").rglob("meta.json")) \
            if args.root1000 else list(build_root1000(root).simulator)
        print(f"root1000: {len(simulator)} simulator runs ready in {time.perf_counter() - start:.1f} s")
        roots[1000] = (root, simulator[:PICKED])
    return roots


def scale_part(args: argparse.Namespace) -> None:
    """The speed table of issue 44: Runs first and second visit and Compare with 50 runs, at 100 and
    1,000 runs, quiet and under ``args.load`` busy processes."""
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as folder:
        roots = scale_roots(args, Path(folder))
        print(f"\ncpus: {os.cpu_count()}; load average before: {', '.join(f'{v:.1f}' for v in os.getloadavg())}; "
              f"{args.starts} fresh servers per row (median, then each)\n")
        print(f"| runs | busy processes | Runs, first visit (s) | Runs, second visit (s) | Compare, {PICKED} runs (s) "
              "| load average (1 min, before → after) |")
        print("|---:|---:|---|---|---|---|")
        for size, (root, labels) in roots.items():
            listed = sum(1 for _ in root.rglob("meta.json"))
            for load in (0, args.load):
                busy = _busy(load)
                before = os.getloadavg()[0]
                try:
                    rows = [scale_visits(root, labels) for _ in range(args.starts)]
                finally:
                    for process in busy:
                        process.kill()
                        process.wait()
                print(f"| {size} ({listed} folders) | {load} | {_median_of(rows, 0)} | {_median_of(rows, 1)} | "
                      f"{_median_of(rows, 2)} | {before:.1f} → {os.getloadavg()[0]:.1f} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
