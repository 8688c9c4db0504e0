"""Benchmark: Compare with 50 runs picked, two checkouts of the app side by side (an A/B measurement).

For each round and each root, each checkout in turn starts a fresh server (``python -m gdro_cli app``
run from that checkout), the Runs page is visited twice (as in ``bench_app.py --only scale``), then
Compare is opened with the first :data:`PICKED` runs under ``<root>/runs`` (or ``<root>/study``)
picked (``?pick=`` in the URL, a new session). It prints, per visit, the seconds from the request
until the charts are drawn, and the CPU seconds the browser's processes and the server's used meanwhile
(read from ``/proc``): CPU seconds vary less with the machine's other work than the wall clock does.
Alternating the checkouts on one machine compares them in the same conditions.

    python benchmarks/bench_app_compare_ab.py --checkouts OLD NEW --roots ROOT1000 [ROOT100] [--rounds 4]

A benchmark that prints a table, not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import urllib.parse
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "apps"))

import browser  # noqa: E402  (tests/apps/browser.py, on the path above)

PICKED = 50
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def _cpu_seconds() -> dict[str, float]:
    """CPU seconds (user + system) of this process's descendants: Chromium's, and the server's."""
    children: dict[int, list[int]] = {}
    used: dict[int, tuple[str, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = open(f"/proc/{entry}/stat").read()
        except OSError:
            continue
        name, fields = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()
        children.setdefault(int(fields[1]), []).append(int(entry))
        used[int(entry)] = (name, (int(fields[11]) + int(fields[12])) * TICK_S)
    totals = {"browser": 0.0, "server": 0.0}
    stack = list(children.get(os.getpid(), []))
    while stack:
        pid = stack.pop()
        stack += children.get(pid, [])
        name, seconds = used[pid]
        totals["server" if name.startswith(("python", "gdro", "streamlit")) else "browser"] += seconds
    return totals


def picked_labels(root: Path) -> list[str]:
    """The first :data:`PICKED` runs under ``root/runs`` (root1000) or ``root/study`` (root100)."""
    folder = root / "runs" if (root / "runs").is_dir() else root / "study"
    return sorted(path.parent.relative_to(root).as_posix() for path in folder.rglob("meta.json"))[:PICKED]


def one_visit(checkout: Path, root: Path) -> tuple[float, float, float]:
    """(seconds until drawn, browser CPU s, server CPU s) of Compare on a fresh server of ``checkout``."""
    query = urllib.parse.urlencode([("pick", label) for label in picked_labels(root)])
    here = os.getcwd()
    os.chdir(checkout)
    try:
        with browser.running_app([], root, timeout_s=300, env={"PYTHONPATH": str(checkout)}) as url:
            with browser.chromium_page(width=1600, height=1200) as page:
                for _visit in range(2):
                    page.goto(url, wait_until="domcontentloaded")
                    browser.wait_for_run_table(page, timeout_s=300)
                    page.goto("about:blank")  # leave the app: the next visit is a new session
            with browser.chromium_page(width=1600, height=1200) as page:
                before = _cpu_seconds()
                page.goto(f"{url}/compare?{query}", wait_until="domcontentloaded")
                drawn = browser.wait_for_view(page, min_charts=1, timeout_s=300)
                after = _cpu_seconds()
                problems = browser.error_texts(page)
                if problems:
                    raise RuntimeError(f"Compare shows an error: {problems}")
    finally:
        os.chdir(here)
    return drawn, after["browser"] - before["browser"], after["server"] - before["server"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkouts", nargs="+", type=Path, required=True, help="folders of the app's checkouts")
    parser.add_argument("--roots", nargs="+", type=Path, required=True, help="roots (tests/apps/root1000.py, root100.py)")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    times: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for round_index in range(args.rounds):
        for root in args.roots:
            for checkout in args.checkouts:
                measured = one_visit(checkout.resolve(), root.resolve())
                times.setdefault((str(checkout), root.name), []).append(measured)
                print(f"round {round_index}, {checkout}, {root.name}: {measured[0]:.2f} s, browser CPU "
                      f"{measured[1]:.2f} s, server CPU {measured[2]:.2f} s; load average "
                      f"{os.getloadavg()[0]:.1f}", flush=True)
    print(f"\n| checkout | root | Compare, {PICKED} runs (s) | browser CPU (s) | server CPU (s) |\n|---|---|---|---|---|")
    for (checkout, root), rows in times.items():
        medians = [statistics.median(row[index] for row in rows) for index in range(3)]
        values = ", ".join(f"{row[0]:.2f}" for row in rows)
        print(f"| {checkout} | {root} | {medians[0]:.2f} ({values}) | {medians[1]:.2f} | {medians[2]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
