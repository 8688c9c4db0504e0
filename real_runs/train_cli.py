"""`gdro train CONFIG [key=value ...] [--out DIR] [--dry-run | --rehearse]` and `gdro train --resume RUN_DIR`.

CONFIG is a preset name (``gdro train --list`` shows them) or a TOML file; ``section.key=value``
overrides any field (``train.steps=10 method.name=joint``). ``--dry-run`` checks the config, the
output folder, the device, the model source, the data and the evaluation sets and prints the
plan, loading no model (:mod:`real_runs.dryrun`). ``--rehearse`` runs the config's whole path on
CPU with a shrunk model (:mod:`real_runs.rehearse`). Bad input is one line on stderr and exit
status 2; nothing already written is touched. Set ``GDRO_DEBUG=1`` for the traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

from studykit.args import OneLineParser, folder_problem


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="gdro train", description="GRPO / Prompt-GDRO / Rollout-GDRO / joint training of a language model.",
        epilog="examples: gdro train tiny-cpu method.name=joint  |  gdro train paper-qwen3-1.7b method.name=rollout_gdro "
               "--out runs  |  gdro train --resume runs/joint-tiny-s0")
    parser.add_argument("config", nargs="?", help="preset name or TOML file")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="section.key=value overrides")
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue this run from its last checkpoint")
    parser.add_argument("--out", metavar="DIR", help="folder for the run directory (train.out)")
    parser.add_argument("--list", action="store_true", help="list the presets and exit")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config as JSON and exit")
    parser.add_argument("--dry-run", action="store_true",
                        help="check config, output folder, device, model source and data; print the plan; load no model")
    parser.add_argument("--stop-after", type=int, metavar="STEP",
                        help="end after this step with a checkpoint and status 'stopped' (for time-limited jobs); "
                             "continue with --resume")
    parser.add_argument("--rehearse", action="store_true",
                        help="run the config's whole path for 2 steps on CPU with a shrunk model (real_runs/rehearse.py)")
    return parser


def check_resume_target(resume: str) -> None:
    """What ``--resume RUN_DIR`` must be before the trainer looks inside: an existing folder that no
    other process is writing. The lock comes before every check of the run's contents, so a live
    run (before its first checkpoint, say) is reported as live, never as broken."""
    from gdro_lab.runformat.runlog import RunLock, RunLockedError
    from real_runs.preflight import TrainError
    problem = folder_problem(resume, "run directory")
    if problem == "does not exist":
        raise TrainError(f"--resume {resume} does not exist: pass the run directory gdro train printed "
                         "(train.out/train.run_name)")
    if problem is not None:
        raise TrainError(f"--resume {resume} {problem}: pass the run directory gdro train printed")
    try:
        RunLock.check(resume)
    except RunLockedError as err:
        raise TrainError(f"--resume {err}") from None


def run(args: argparse.Namespace) -> str:
    """Validate the arguments, train, return the run directory."""
    from real_runs.config import config_to_dict, load_config
    from real_runs.preflight import TrainError, run_dir_of
    from real_runs.train import main
    if args.dry_run and args.rehearse:
        raise TrainError("--dry-run checks and writes nothing, --rehearse trains on CPU and writes a run: give one")
    if args.stop_after is not None and args.stop_after < 1:
        raise TrainError(f"--stop-after {args.stop_after}: give a step number of at least 1")
    if args.resume:
        if args.config or args.overrides or args.out:
            raise TrainError("--resume continues a run with its own saved config: give no CONFIG, overrides or --out")
        check_resume_target(args.resume)
        return str(main(None, resume=args.resume, stop_after=args.stop_after))
    if not args.config:
        raise TrainError("give a CONFIG (a preset such as tiny-cpu, or a TOML file) or --resume RUN_DIR")
    overrides = list(args.overrides) + ([f"train.out={json.dumps(args.out)}"] if args.out else [])
    if args.rehearse:
        from real_runs.rehearse import rehearse
        return str(rehearse(args.config, overrides))
    cfg = load_config(args.config, overrides)
    args.run_dir = str(run_dir_of(cfg))  # what an interrupted run's line names
    if args.print_config:
        print(json.dumps(config_to_dict(cfg), indent=1))
        return ""
    if args.dry_run:
        from real_runs.dryrun import dry_run
        problems = dry_run(cfg)
        if problems:
            raise TrainError(f"dry run found {len(problems)} problem(s): " + "; ".join(problems))
        print("gdro train: dry run ok: nothing was written")
        return ""
    return str(main(cfg, stop_after=args.stop_after))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_intermixed_args(argv)  # overrides may follow --out
    if args.list:
        from real_runs.config import preset_names
        print("\n".join(preset_names()))
        return 0
    args.run_dir = args.resume
    try:
        run_dir = run(args)
    except KeyboardInterrupt:
        where = args.run_dir if args.run_dir and os.path.isdir(args.run_dir) else None
        print("gdro train: interrupted; " + (f"the run is kept (status 'interrupted'): continue with gdro train "
              f"--resume {where}" if where else "no run directory was written"), file=sys.stderr)
        return 130
    except OSError as err:  # a folder it may not write, a full disk
        if os.environ.get("GDRO_DEBUG"):
            raise
        print(f"gdro train: cannot write {err.filename or 'the run'} ({err.strerror or err}): check train.out "
              "(--out) and its permissions", file=sys.stderr)
        return 2
    except ValueError as err:  # ConfigError, DataError, ModelError, RunFormatError, TrainError, ...
        if os.environ.get("GDRO_DEBUG"):
            raise
        message = " ".join(str(err).split()) or err.__class__.__name__
        print(f"gdro train: {message}", file=sys.stderr)
        return 2
    if run_dir:
        print(f"gdro train: run directory {run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
