"""`gdro arena [--update-reports] [--quick] [--sim-only] [--out DIR] [--workers N] [--jobs N]`.

The allocation arena's one command: the CPU LM study's arena (real_runs/lmstudy/arena.py, through
the real trainer) writes ``OUT/lm-arena.json``, then the simulator's arena (``gdro simulate arena``:
five worlds and the paper-scale SE check, simulators/studies/arena.py) writes the report with both
and prints the decision. Finished runs whose config did not change are reused by both parts, so a
rerun redoes only what changed. ``--update-reports`` copies the report into the repository's
``reports/arena``. This module only sequences the two parts (the simulator and real_runs never
import each other).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

QUICK_SIM = ["--seeds", "2", "--steps", "30", "--prompts", "600", "--batch", "48", "--lr-grid", "0.5,1"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gdro arena", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("gdro-runs") / "arena", help="runs and report folder")
    parser.add_argument("--workers", type=int, default=2, help="simulator worker processes (default 2)")
    parser.add_argument("--jobs", type=int, default=2, help="LM runs in parallel, one thread each (default 2)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run; numbers are not evidence)")
    parser.add_argument("--sim-only", action="store_true", help="skip the LM study (the report says so)")
    parser.add_argument("--update-reports", action="store_true", help="copy the report into reports/arena")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.workers < 1 or args.jobs < 1:
        print("gdro arena: --workers and --jobs must be >= 1", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.sim_only:
        from real_runs.lmstudy.arena import main_arena
        try:
            path = main_arena(args.out, quick=args.quick, jobs=args.jobs)
        except (ValueError, OSError) as err:
            print(f"gdro arena: LM study: {err}", file=sys.stderr)
            return 2
        print(f"LM arena: {path}", file=sys.stderr)
    elif (args.out / "lm-arena.json").exists():
        (args.out / "lm-arena.json").unlink()  # a stale LM section must not enter a --sim-only report
    from simulators.cli import main as simulate
    sim_args = ["arena", "--out", str(args.out), "--workers", str(args.workers)]
    sim_args += QUICK_SIM if args.quick else []
    sim_args += ["--update-reports"] if args.update_reports else []
    return simulate(sim_args)
