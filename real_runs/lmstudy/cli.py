"""``gdro study lm [--quick | --small] [--seeds N] [--steps N] [--slip-rate R] [--jobs N] [--out DIR] [--report DIR]``.

Its folders follow the write policy of every command (:mod:`gdro_lab.runformat.output`): ``--out``,
``--report`` and ``--calibration-data`` must be new, empty or written by ``gdro study`` (a folder the
study wrote before the marker existed is recognised by its layout, :func:`made_by_the_study`); anything
else is refused in one line before any compute. The folder is the first line it prints.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
from pathlib import Path
from typing import Sequence

from studykit.args import OneLineParser


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="gdro study",
        description="A learning study on CPU: a small Qwen3 warm-started on a synthetic arithmetic suite, "
                    "then GRPO, step-matched GRPO, Prompt-GDRO, Rollout-GDRO and joint through the real trainer.",
        epilog="example: gdro study lm --quick --out /tmp/lmq   (CI setting, a few minutes)")
    parser.add_argument("study", choices=["lm"], help="the study to run (only `lm` for now)")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="tiny CI setting (every method, a few minutes)")
    size.add_argument("--small", action="store_true",
                      help="reduced setting: 3 seeds x 60 steps x 32 prompts over an 800-prompt pool")
    parser.add_argument("--seeds", type=_positive, help="seeds per method (default 3; quick 2)")
    parser.add_argument("--steps", type=_positive, help="RL steps per run (default 200; quick 4)")
    parser.add_argument("--slip-rate", type=_rate, dest="slip_rate",
                        help="share of the warm start's demonstrations with a systematic slip, in [0, 1) "
                             "(default 0.3; 0 = a clean demonstrator, the first study's negative result)")
    parser.add_argument("--jobs", type=_positive, help="runs in parallel, one thread each (default 2)")
    parser.add_argument("--out", type=Path, default=None,
                        help="study folder for run directories (default runs/lm-study[-quick])")
    parser.add_argument("--report", type=Path, default=None, help="report folder (default OUT/report)")
    parser.add_argument("--report-only", action="store_true",
                        help="no training: report the seeds of OUT whose runs all finished")
    parser.add_argument("--calibration-data", type=Path, metavar="OUT",
                        help="no study: write what `gdro calibrate` reads into OUT (the warm start sampled on the "
                             "training pool, and a short GRPO learning-rate sweep); docs/calibration.md")
    return parser


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text!r}") from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {value}")
    return value


#: The name in the write policy's marker (the command; ``lm`` is its only study).
COMMAND = "gdro study"
#: What each folder of the study holds (its layout before the write policy's marker), by flag.
LAYOUT = {"--out": {"runs", "initial", "report"},
          "--calibration-data": {"warmstart-eval", "sweep", "calibration-data.json"}}


def made_by_the_study(flag: str, folder: Path) -> bool:
    """``folder`` was written by the study before :data:`gdro_lab.runformat.output.MARKER`: only the
    study's own entries (``--report``: its report.md, titled as the study titles it, and slips.json)."""
    if flag == "--report":
        report = folder / "report.md"
        try:
            return (folder / "slips.json").is_file() and report.read_text(encoding="utf-8").startswith(
                "# A learning study on CPU")
        except (OSError, UnicodeDecodeError):
            return False
    names = {entry.name for entry in folder.iterdir() if not entry.name.startswith(".")}
    return bool(names) and names <= LAYOUT[flag]


def claim_folders(folders: dict[str, Path]) -> None:
    """The write policy for each ``flag -> folder``: all are checked before any is created (a refused
    ``--report`` leaves no new ``--out`` behind); raises a one-line ConfigError."""
    from gdro_lab._validate import ConfigError
    from gdro_lab.runformat.output import claim_output, output_problem
    for flag, folder in folders.items():
        problem = output_problem(folder, COMMAND, accept=functools.partial(made_by_the_study, flag))
        if problem is not None:
            raise ConfigError(f"{flag} {folder} {problem}: give a new or empty folder, or one {COMMAND} wrote "
                              "(nothing was written)")
    for flag, folder in folders.items():
        claim_output(folder, COMMAND, flag, accept=functools.partial(made_by_the_study, flag))


def setting_of(args: argparse.Namespace) -> str:
    """The study's setting: ``quick``, ``small`` or ``default``."""
    return "quick" if args.quick else "small" if args.small else "default"


def folders(args: argparse.Namespace) -> tuple[Path, Path]:
    """``(out, report)``: ``--out`` (default ``runs/lm-study``, or ``runs/lm-study-quick`` / ``-small``)
    and ``--report`` (default ``OUT/report``)."""
    name = setting_of(args)
    out = args.out or Path("runs") / ("lm-study" if name == "default" else f"lm-study-{name}")
    return out, args.report or out / "report"


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from gdro_lab._validate import ConfigError
    name = setting_of(args)
    out, report_dir = folders(args)
    if args.calibration_data is not None:
        written = {"--calibration-data": args.calibration_data}
    else:  # --report-only reads --out and writes only the report
        written = {"--report": report_dir} if args.report_only else {"--out": out, "--report": report_dir}
    try:
        claim_folders(written)
    except ConfigError as err:
        print(f"gdro study lm: {err}", file=sys.stderr)
        return 2
    print("gdro study lm: writing to " + ", ".join(f"{folder} ({flag})" for flag, folder in written.items()),
          flush=True)
    from real_runs.lmstudy import learning_study, pipeline

    cfg = {"quick": learning_study.QUICK, "small": learning_study.SMALL, "default": learning_study.DEFAULT}[name]
    changes = {k: getattr(args, k) for k in ("seeds", "steps", "jobs") if getattr(args, k) is not None}
    cfg = dataclasses.replace(cfg, **changes)
    if args.slip_rate is not None:
        cfg = dataclasses.replace(cfg, warm=dataclasses.replace(cfg.warm, slip_rate=args.slip_rate))
    if args.calibration_data is not None:
        from real_runs.lmstudy.calibration_data import calibration_data

        calibration_data(cfg, args.calibration_data, steps=args.steps or (6 if args.quick else 60))
        return 0
    try:
        path = pipeline.study_and_report(cfg, out, report_dir, setting=name, report_only=args.report_only)
    except (ValueError, OSError) as err:
        print(f"gdro study lm: {err}", file=sys.stderr)
        return 2
    decision = path.parent / "decision.txt"
    if decision.is_file():
        print(decision.read_text(encoding="utf-8"), end="")
    print(f"report: {path}")
    return 0
