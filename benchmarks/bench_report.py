"""Benchmark: the CPU time of ``gdro report``'s per-run figures, and of the whole command on a root.

Per figure kind, the CPU seconds one process spends per run building the figure and saving its PNG
(``apps.report.cli.write_report``'s seven figures, one run after the other, after one run drawn to
warm up), over ``--runs`` runs taken evenly from the root. With ``--against DIR`` (another checkout
of the repository, e.g. ``git worktree add /tmp/old <commit>``) the same measurement runs with that
checkout's ``apps.report``, alternately with this one's, ``--rounds`` times each, every round in a
fresh process: an A/B comparison that holds while other jobs share the machine (compare CPU
times, not wall times). With ``--whole`` it then runs ``gdro report ROOT --jobs 2`` once per
checkout and prints its wall time and the CPU time (user + system) of its processes.

The root is a folder of runs; without ``--root`` the 100-run study of tests/apps/root100.py is
built in a temporary folder first (a minute). Target (issue 44): ``gdro report`` on 100 runs
within 60 s of wall time on 2 quiet cores. This is a benchmark that prints tables, not a test.

    python benchmarks/bench_report.py [--root DIR] [--runs 8] [--against OLD_CHECKOUT] [--rounds 2] [--whole]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KINDS = ("traveling_wave", "lead_lag", "rollout_budget", "se_proxy", "outcomes", "evaluations", "step_time")


def measure(root: Path, runs: int, out: Path) -> dict[str, float]:
    """CPU seconds per run of each figure kind (build + save), drawn by the ``apps.report`` on sys.path."""
    from apps.data import listing, loading
    from apps.report import figures

    found, _ = listing.find_candidates(root)
    paths = sorted(found)
    picked = [loading.load_run(path) for path in paths[::max(1, len(paths) // runs)][:runs]]
    makers = {"traveling_wave": figures.traveling_wave_figure, "lead_lag": figures.lead_lag_figure,
              "rollout_budget": figures.rollout_budget_figure, "se_proxy": figures.se_proxy_figure,
              "outcomes": figures.outcomes_figure, "evaluations": figures.evaluations_figure,
              "step_time": figures.step_time_figure}
    seconds = dict.fromkeys(KINDS, 0.0)
    for index, run in enumerate([picked[0], *picked]):  # the first run warms up (fonts, caches)
        for kind, make in makers.items():
            start = time.process_time()
            figures.save_png(make(run), out / f"{kind}-{index}.png")
            if index:
                seconds[kind] += time.process_time() - start
    return {kind: total / len(picked) for kind, total in seconds.items()}


def child(code: Path, root: Path, runs: int) -> dict[str, float]:
    """:func:`measure` in a fresh process importing ``apps`` from ``code``."""
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, __file__, "--child", "--root", str(root), "--runs", str(runs), "--out", out]
        environment = {**os.environ, "PYTHONPATH": str(code), "OMP_NUM_THREADS": "1"}
        printed = subprocess.run(command, env=environment, cwd=code, capture_output=True, text=True, check=True)
    return json.loads(printed.stdout.splitlines()[-1])


def whole(code: Path, root: Path) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of ``gdro report ROOT --jobs 2`` run from ``code``."""
    with tempfile.TemporaryDirectory() as out:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "gdro_cli.main", "report", str(root), "--out", out, "--jobs", "2"],
                       env={**os.environ, "PYTHONPATH": str(code)}, cwd=code, check=True, capture_output=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, help="a folder of runs (default: build tests/apps/root100.py's study)")
    parser.add_argument("--runs", type=int, default=8, help="runs drawn per measurement (default 8)")
    parser.add_argument("--against", type=Path, help="another checkout to compare with (A/B, alternately)")
    parser.add_argument("--rounds", type=int, default=2, help="measurements per checkout (default 2)")
    parser.add_argument("--whole", action="store_true", help="also time the whole gdro report --jobs 2")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.root, args.runs, args.out)))
        return
    with tempfile.TemporaryDirectory() as scratch:
        root = args.root.resolve() if args.root else None  # the children run in the checkout measured
        if root is None:
            subprocess.run([sys.executable, str(REPO / "tests" / "apps" / "root100.py"), f"{scratch}/root"],
                           cwd=REPO, check=True, capture_output=True)
            root = Path(scratch) / "root" / "study" / "runs"
        codes = {"this checkout": REPO, **({"against": args.against.resolve()} if args.against else {})}
        results: dict[str, list[dict[str, float]]] = {name: [] for name in codes}
        for _ in range(args.rounds):
            for name, code in codes.items():
                results[name].append(child(code, root, args.runs))
        print(f"CPU seconds per run of each figure (build + PNG), one process, {args.runs} runs of {root}, "
              f"median of {args.rounds} rounds:")
        for number, (name, code) in enumerate(codes.items(), start=1):
            print(f"  ({number}) {name}: {code}")
        print(f"{'figure':16s}" + "".join(f"{f'({number})':>10s}" for number in range(1, len(codes) + 1)))
        for kind in (*KINDS, "all seven"):
            row = [statistics.median(sum(result.values()) if kind == "all seven" else result[kind]
                                     for result in results[name]) for name in codes]
            print(f"{kind:16s}" + "".join(f"{value:10.3f}" for value in row))
        if args.whole:
            for name, code in codes.items():
                wall, cpu = whole(code, root)
                print(f"gdro report {root} --jobs 2 ({name}): wall {wall:.1f} s, CPU (user + system) {cpu:.1f} s")


if __name__ == "__main__":
    main()
