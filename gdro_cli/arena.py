"""`gdro arena [--update-reports] [--quick] [--sim-only] [--out DIR] [--workers N] [--jobs N]`.

The allocation arena's one command: the CPU LM study's arena (real_runs/lmstudy/lm_arena.py, through
the real trainer) writes ``OUT/lm-arena.json``, then the simulator's arena (``gdro simulate arena``:
five worlds and the paper-scale SE check, simulators/studies/allocation_arena.py) writes the report with both
and prints the decision. Finished runs whose config did not change are reused by both parts, so a
rerun redoes only what changed. ``--update-reports`` copies the report into the repository's
``reports/arena``. This module only sequences the two parts (the simulator and real_runs never
import each other).

The full arena (5 worlds x 3 seeds x 300 steps, every method on its own sqrt(2) learning-rate grid
extended at edges, the paper-scale SE check, the LM part) takes hours on 2 cores; ``--worlds``,
``--seeds``, ``--steps``, ``--prompts``, ``--batch``, ``--lr-grid``, ``--lr-extend`` and
``--no-paper-scale`` reduce it (the report states the setting it ran).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from studykit.args import OneLineParser

QUICK_SIM = ["--seeds", "2", "--steps", "30", "--prompts", "600", "--batch", "48", "--lr-grid", "0.707107,1", "--lr-extend", "1"]


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="gdro arena", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("gdro-runs") / "arena", help="runs and report folder")
    parser.add_argument("--workers", type=int, default=2, help="simulator worker processes (default 2)")
    parser.add_argument("--jobs", type=int, default=2, help="LM runs in parallel, one thread each (default 2)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run; numbers are not evidence)")
    parser.add_argument("--sim-only", action="store_true", help="skip the LM study (the report says so)")
    parser.add_argument("--lm-seeds", type=int, help="seeds of the LM part (default 3; fewer is stated in the report)")
    parser.add_argument("--lm-grid", choices=("sqrt2", "coarse"), default="sqrt2",
                        help="lr scales of the LM part: sqrt2 = {0.5, 0.71, 1, 1.41, 2} (default), coarse = {0.5, 1, 2} "
                             "(a reduced setting, stated in the report)")
    parser.add_argument("--lm-reuse-only", action="store_true",
                        help="LM part from its finished runs only (a method keeps the seeds finished at every lr "
                             "scale; the report says which have fewer seeds)")
    parser.add_argument("--update-reports", action="store_true", help="copy the report into reports/arena")
    parser.add_argument("--worlds", help="comma-separated simulator worlds (default: all five: default, "
                        "paper-1.7b, paper-4b, paper-8b, bimodal)")
    parser.add_argument("--no-paper-scale", action="store_true",
                        help="skip the SE-only check in the bimodal world at the sqrt-law study's scale")
    for flag, kind, text in (("--seeds", int, "seeds per method"), ("--steps", int, "training steps"),
                             ("--prompts", int, "prompts in each world's pool"), ("--batch", int, "prompts per step"),
                             ("--lr-grid", str, "starting lr scales, at most sqrt(2) apart (e.g. 0.5,0.707,1,1.41,2)"),
                             ("--lr-extend", int, "most sqrt(2) steps a method's grid grows beyond each end")):
        parser.add_argument(flag, type=kind, help=f"simulator: {text} (the arena's default otherwise)")
    return parser


def sim_args(args: argparse.Namespace) -> list[str]:
    """The `gdro simulate arena` arguments of these options."""
    out = ["arena", "--out", str(args.out), "--workers", str(args.workers)]
    out += QUICK_SIM if args.quick else []
    for name in ("seeds", "steps", "prompts", "batch", "lr_grid", "lr_extend"):
        value = getattr(args, name)
        if value is not None:
            out += ["--" + name.replace("_", "-"), str(value)]
    return out


def run_simulator(args: argparse.Namespace, made: dict | None = None) -> int:
    """The simulator's arena with these options (as `gdro simulate arena`, plus --worlds / --no-paper-scale);
    ``made`` (:func:`made_by`) goes into its summary.json as the provenance."""
    from gdro_lab._validate import ConfigError
    from simulators import cli
    from simulators.studies import allocation_arena
    try:
        settings = cli._settings(cli.build_parser().parse_args(sim_args(args)), allocation_arena)
        settings.validate()
        worlds = [w.strip() for w in args.worlds.split(",") if w.strip()] if args.worlds else None
        report = allocation_arena.run(settings, worlds_only=worlds, paper_scale=not args.no_paper_scale)
        if made is not None:
            from studykit.provenance import add_provenance
            add_provenance(settings.out / "summary.json", made)
        copied = cli.update_reports(settings.out, "arena") if args.update_reports else None
    except ConfigError as err:
        print(f"gdro arena: error: {err}", file=sys.stderr)
        return 2
    print((report.parent / "decision.txt").read_text(encoding="utf-8"), end="")
    print(f"report: {report.resolve()}")
    if copied is not None:
        print(f"updated: {copied.resolve()}")
    return 0


def check_worlds(worlds: str | None) -> None:
    """``--worlds`` names only the simulator's worlds (checked before the LM part's hours, not after)."""
    from studykit.args import did_you_mean
    from gdro_lab._validate import ConfigError
    from simulators.studies.allocation_arena import WORLDS
    for name in [w.strip() for w in (worlds or "").split(",") if w.strip()]:
        if name not in WORLDS:
            hint = did_you_mean(name, WORLDS)
            raise ConfigError(f"--worlds: unknown world {name!r}: {hint + ' ' if hint else ''}"
                              f"choose from {', '.join(WORLDS)}")


def claim(out: Path) -> None:
    """The write policy (gdro_lab.runformat.output) for ``--out``: a new or empty folder, or one the arena
    or the simulator wrote (its runs are reused); a user's folder or an unwritable one fails at once."""
    from gdro_lab.runformat.output import claim_output, owners
    from simulators.reporting import simulator_folder
    claim_output(out, "gdro arena", accept=lambda f: "gdro simulate" in owners(f) or simulator_folder(f))


def made_by(words: Sequence[str], args: argparse.Namespace) -> dict:
    """summary.json's provenance, taken as the arena starts (the code that runs it): the digest of
    this command's modules, the command without one machine's flags (--out, --workers, --jobs) and the
    settings (studykit.provenance; the freshness test compares the digest with the code's)."""
    from studykit.provenance import portable, provenance, settings_of
    kept = portable(list(words), drop=("--out", "--workers", "--jobs"), switches=("--progress", "--no-progress"))
    settings = settings_of(args, drop=("out", "workers", "jobs", "update_reports"))
    return provenance(["gdro_cli.arena"], " ".join(["gdro arena", *kept]), settings)


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(words)
    made = made_by(words, args)
    if args.workers < 1 or args.jobs < 1 or (args.lm_seeds is not None and args.lm_seeds < 1):
        print("gdro arena: --workers, --jobs and --lm-seeds must be >= 1", file=sys.stderr)
        return 2
    from gdro_lab._validate import ConfigError
    try:
        check_worlds(args.worlds)
        claim(args.out)
    except ConfigError as err:
        print(f"gdro arena: error: {err}", file=sys.stderr)
        return 2
    parts = "the simulator part" if args.sim_only else "the LM part (a line per run done), then the simulator part"
    print(f"gdro arena: writing to {args.out.resolve()} ({parts})", file=sys.stderr, flush=True)
    if not args.sim_only:
        from real_runs.lmstudy.lm_arena import main_arena
        try:
            path = main_arena(args.out, quick=args.quick, jobs=args.jobs, seeds=args.lm_seeds, reuse_only=args.lm_reuse_only,
                              coarse=args.lm_grid == "coarse")
        except (ValueError, OSError) as err:
            print(f"gdro arena: LM study: {err}", file=sys.stderr)
            return 2
        print(f"LM arena: {path}", file=sys.stderr)
    elif (args.out / "lm-arena.json").exists():
        (args.out / "lm-arena.json").unlink()  # a stale LM section must not enter a --sim-only report
    return run_simulator(args, made)
