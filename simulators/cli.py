"""`gdro simulate [STUDY] [options]`: run a toy study in the heavy-tailed bandit world.

With no arguments it runs the default study (`curriculum` at its default settings: 7 methods,
5 seeds, 1,000 steps, 256 prompts per step, 14,116 prompts) and prints where the report is.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Callable

from gdro_lab import ConfigError, RunFormatError
from simulators.studies import STUDIES

DEFAULT_STUDY = "curriculum"
MODULES = {"curriculum": "curriculum", "sqrt-law": "sqrt_law", "surrogate": "surrogate", "ablation": "ablation"}
STUDY_HELP = {
    "curriculum": "all methods at equal budget, >= 5 seeds: accuracy, worst group, pass@8, support, waves",
    "sqrt-law": "weighted SE proxy of uniform vs Rollout-GDRO vs the square-root optimum; the staircase",
    "surrogate": "entropic surrogate vs max (Lemma 4.1) and the no-regret game's duality gap",
    "ablation": "full-factorial sweep: main effects and two-way interactions with CIs",
}


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line and never exits the interpreter."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(message)

    def exit(self, status: int = 0, message: str | None = None) -> None:  # type: ignore[override]
        if message:
            print(message, file=sys.stderr, end="")
        raise _Exit(status)


class _Exit(Exception):
    def __init__(self, status: int):
        self.status = status


def _integer_at_least(lowest: int) -> Callable[[str], int]:
    """argparse type: an integer >= lowest, with a one-line error otherwise."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < lowest:
            raise argparse.ArgumentTypeError(f"{value} must be >= {lowest}")
        return value
    return parse


_positive = _integer_at_least(1)
_nonnegative = _integer_at_least(0)


def build_parser() -> argparse.ArgumentParser:
    from simulators.methods import METHODS
    studies = "\n".join(f"  {name:<11} {STUDY_HELP[name]}" for name in STUDIES)
    studies += "\n\nmethods (--methods):\n" + "\n".join(f"  {m:<18} {spec.summary}" for m, spec in METHODS.items())
    parser = _Parser(
        prog="gdro simulate", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Toy studies in a heavy-tailed bandit world (docs/simulator.md). Each study writes run "
                    "directories (gdro run format) and a markdown report with figures into --out.",
        epilog=f"studies:\n{studies}\n\nWith no STUDY, runs `{DEFAULT_STUDY}` at its defaults (about 1-2 minutes "
               "on 2 cores).\nExamples:\n  gdro simulate\n  gdro simulate sqrt-law --seeds 3\n"
               "  gdro simulate curriculum --methods grpo,joint --steps 300 --out /tmp/cur")
    parser.add_argument("study", nargs="?", default=DEFAULT_STUDY, choices=STUDIES, metavar="STUDY",
                        help=f"one of {', '.join(STUDIES)} (default {DEFAULT_STUDY})")
    parser.add_argument("--out", type=Path, help="output folder (default reports/<study>)")
    parser.add_argument("--seeds", type=_positive, help="seeds per method (study default otherwise)")
    parser.add_argument("--steps", type=_positive, help="training steps (game iterations for surrogate)")
    parser.add_argument("--prompts", type=_positive, help="prompts in the pool")
    parser.add_argument("--batch", type=_positive, help="prompts per step")
    parser.add_argument("--workers", type=_positive, default=2, help="worker processes (default 2)")
    parser.add_argument("--methods", help="comma-separated methods (curriculum, sqrt-law)")
    parser.add_argument("--eval-every", type=_positive, help="steps between exact evaluations (default 20)")
    parser.add_argument("--snapshot-every", type=_nonnegative, default=0,
                        help="steps between controller snapshots; 0 = only at the end (default)")
    parser.add_argument("--snapshot-seeds", type=_nonnegative,
                        help="how many seeds per method write snapshots (default 1: seed 0 only; ablation 0)")
    parser.add_argument("--interference", type=float, help="world interference kappa in [0, 1]")
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument("--progress", dest="progress", action="store_true", default=None,
                          help="always show the progress bar (default: when stderr is a terminal)")
    progress.add_argument("--no-progress", dest="progress", action="store_false", help="never show it")
    return parser


def _settings(args: argparse.Namespace, defaults: dict) -> "object":
    from simulators.methods import METHODS
    from simulators.studies.common import StudySettings
    methods: tuple[str, ...] = ()
    if args.methods:
        methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
        unknown = [m for m in methods if m not in METHODS]
        if unknown or not methods:
            raise ConfigError(f"--methods: unknown method {unknown[0] if unknown else '(none)'!r}: "
                              f"choose from {', '.join(METHODS)}")
    world = {}
    if args.interference is not None:
        world["interference"] = args.interference
    pick = lambda name: getattr(args, name) if getattr(args, name) is not None else defaults[name]  # noqa: E731
    return StudySettings(out=args.out or Path("reports") / args.study, seeds=pick("seeds"), steps=pick("steps"),
                         prompts=pick("prompts"), batch=pick("batch"), workers=args.workers, methods=methods,
                         eval_every=args.eval_every or defaults.get("eval_every", 20),
                         snapshot_every=args.snapshot_every, snapshot_seeds=pick("snapshot_seeds") if "snapshot_seeds" in defaults or
                         args.snapshot_seeds is not None else 1,
                         progress=args.progress, world=world)


def main(argv: list[str] | None = None) -> int:
    """Entry point of `gdro simulate`; returns the exit status (0 ok, 2 bad arguments or data)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(args_list)
        module = importlib.import_module(f"simulators.studies.{MODULES[args.study]}")
        settings = _settings(args, module.DEFAULTS)
        report = module.run(settings)
    except _Exit as done:
        return done.status
    except (ConfigError, RunFormatError) as err:
        print(f"gdro simulate: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gdro simulate: interrupted", file=sys.stderr)
        return 130
    print(f"report: {Path(report).resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
