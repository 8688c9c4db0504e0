"""`gdro calibrate` and `gdro predict`: fit the simulator world to a real model, then predict each method.

    gdro calibrate --samples EVAL_DIR --sweep RUN_DIR [RUN_DIR ...] [--lr LR] [--out DIR]
    gdro calibrate --plan DIR [--method prompt_gdro]   (after gdro predict: the extra sweep that sharpens it)
    gdro predict DIR/world.toml [--draws N] [--seeds N] [--steps N] [--bootstrap B] [--out DIR]

Bad input is a one-line error and exit status 2 (docs/calibration.md).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from studykit.args import with_suggestion
from gdro_lab import ConfigError, RunFormatError
from gdro_lab.runformat.output import claim_output, output_problem

if TYPE_CHECKING:
    from simulators.calibrate import predict
    from simulators.calibrate.calibration import Plan
    from simulators.calibrate.initial_difficulty import SuccessCounts
    from simulators.calibrate.observe import Sweep


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(f"{with_suggestion(message)} (see {self.prog} --help)")


def calibrate_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gdro calibrate", description="Fit the simulator world to a real model: its pass rates on "
                     "a training sample (gdro eval --save-samples) and a short plain-GRPO lr sweep (gdro train).",
                     epilog="example: gdro calibrate --samples runs/cal-eval --sweep runs/sweep-lr1e-6 runs/sweep-lr3e-6 "
                            "runs/sweep-lr1e-5 --lr 1e-6 --out gdro-runs/cal   (then: gdro predict gdro-runs/cal/world.toml)")
    parser.add_argument("--samples", type=Path, nargs="+",
                        help="eval run directories of `gdro eval --save-samples` (or their eval_samples_step*.jsonl)")
    parser.add_argument("--sweep", type=Path, nargs="*", default=[],
                        help="gdro train run directories: plain GRPO at 2+ learning rates, otherwise alike")
    parser.add_argument("--lr", type=float, help="learning rate of the run to predict (default: the sweep's middle lr)")
    parser.add_argument("--pool-size", type=int, help="training prompts of the run to predict (default: the sample's)")
    parser.add_argument("--steps", type=int, help="steps of the run to predict (default: 10x the sweep's, at least 100)")
    parser.add_argument("--batch", type=int, help="prompts per step of the run to predict (default: the sweep's)")
    parser.add_argument("--optimizer", choices=("adam", "sgd"), default="adam",
                        help="adam (gdro train's AdamW: constant advantage scales cancel) or sgd (default adam)")
    parser.add_argument("--boots", type=int, default=40, help="posterior draws per stage: the intervals and gdro predict's worlds (default 40)")
    parser.add_argument("--pilot", type=int, default=64, help="settings tried before the local fit (default 64)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("gdro-runs") / "calibration", help="output folder")
    parser.add_argument("--plan", type=Path, metavar="DIR", help="instead of a fit: read DIR/fit.json and "
                        "DIR/predict/summary.json, print the cheapest extra GRPO sweep that would make the verdict "
                        "sharp, write DIR/plan.md")
    parser.add_argument("--method", default="prompt_gdro", help="--plan: whose verdict vs tuned GRPO (default "
                        "prompt_gdro)")
    return parser


def _plan(args: argparse.Namespace, data: SuccessCounts, sweep: Sweep | None) -> Plan:
    from simulators.calibrate.calibration import Plan

    import numpy as np

    lrs = np.sort(sweep.lrs) if sweep is not None else np.array([1.0])
    lr = args.lr if args.lr is not None else float(lrs[(lrs.size - 1) // 2])
    steps = args.steps or (max(100, 10 * sweep.steps) if sweep is not None else 200)
    batch = args.batch or (sweep.batch if sweep is not None else 64)
    pool = args.pool_size or int(data.group_P.size)
    n = sweep.n if sweep is not None else 4
    for name, value in (("--lr", lr), ("--steps", steps), ("--batch", batch), ("--pool-size", pool)):
        if not value > 0:
            raise ConfigError(f"{name} {value}: must be > 0")
    if batch > pool:
        raise ConfigError(f"--batch {batch} is larger than the pool ({pool} prompts): give --pool-size")
    if pool < 4 * data.num_groups:
        raise ConfigError(f"the sample has {data.num_groups} groups but the pool only {pool} prompts: the world needs "
                          f"at least 4 per group (give --pool-size {4 * data.num_groups} or more)")
    return Plan(pool_size=pool, batch=batch, steps=steps, n_bar=n, n_min=min(2, n), n_max=max(12, n), lr=lr,
                optimizer=args.optimizer)


def calibrate_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `gdro calibrate`."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in args_list):
        calibrate_parser().print_help()
        return 0
    try:
        args = calibrate_parser().parse_args(args_list)
        if args.plan is not None:
            return _plan_main(args.plan, args.method)
        if not args.samples:
            raise ConfigError("the following arguments are required: --samples (see gdro calibrate --help)")
        check_out_folder(args.out, "gdro calibrate")
        from studykit.provenance import portable, provenance, settings_of
        made_by = provenance(["simulators.calibrate.cli"], "gdro calibrate " + shlex.join(portable(args_list)),
                             settings_of(args))  # the code that runs, taken as it starts
        from simulators.calibrate import calibration, observe

        started = time.perf_counter()
        data = observe.read_samples(args.samples)
        sweep = observe.read_sweep(args.sweep, data.group_names) if args.sweep else None
        plan = _plan(args, data, sweep)
        claim_output(args.out, "gdro calibrate")  # before the fit's minutes, after the inputs' checks
        print(f"gdro calibrate: writing to {args.out.resolve()}", file=sys.stderr, flush=True)  # the first line
        record = calibration.calibrate(data, sweep, plan, boots=args.boots, pilot=args.pilot, seed=args.seed,
                                       log=lambda line: print(line, file=sys.stderr, flush=True))
        report = calibration.write_outputs(record, args.out, "gdro calibrate " + shlex.join(args_list), made_by)
    except (ConfigError, RunFormatError) as err:
        print(f"gdro calibrate: error: {err}", file=sys.stderr)
        return 2
    except UnicodeDecodeError:
        print("gdro calibrate: error: --samples: a file is not UTF-8 text (a binary file?): give the eval run "
              "directories of gdro eval --save-samples or their eval_samples_step*.jsonl", file=sys.stderr)
        return 2
    print(summary_lines(record, time.perf_counter() - started))
    print(f"world: {(args.out / 'world.toml').resolve()}")
    print(f"report: {report.resolve()}")
    return 0


def _plan_main(cal_dir: Path, method: str) -> int:
    """`gdro calibrate --plan DIR` (simulators/calibrate/next_sweep.py); ConfigError goes to the caller."""
    from simulators.calibrate import next_sweep

    result = next_sweep.make_plan(cal_dir, method)
    text = next_sweep.screen(result)
    report = next_sweep.write(result, text, cal_dir)
    print(text)
    print(f"plan: {report.resolve()}")
    return 0


def summary_lines(record: dict, seconds: float) -> str:
    """A few plain lines: what was fitted and what is weakly identified."""
    weak = [n for n, note in record["identification"].items() if note.startswith("weak")]
    dyn = record["dynamics"]
    lines = [f"gdro calibrate: fitted in {seconds:.0f} s"]
    if dyn:
        v = dyn["medians"]  # world.toml's values
        lines.append(f"  posterior medians: learning speed lr_group {v['lr_group']:.3g}, memorisation lr_prompt {v['lr_prompt']:.3g}, "
                     f"step price curvature {v['curvature']:.3g}, score noise tau {v['score_noise']:.3g}, "
                     f"transfer {v['transfer']:.2f} (reduced chi2 {dyn['chi2_red']:.2f})")
    else:
        lines.append("  no --sweep: only the difficulty distribution was fitted; the learning dynamics are defaults")
    fit = record.get("lengths")
    lines.append("  length model (a, b, c, s, max_new_tokens): " + ", ".join(f"{v:.3g}" for v in fit["values"].values())
                 + f" (from {fit['responses']:,} responses' token counts)" if fit else
                 "  length model: the samples carry no token counts; the world keeps the default (lengths off)")
    lines.append("  weakly identified by these data: " + (", ".join(weak) or "none"))
    return "\n".join(lines)


def predict_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gdro predict", description="Run GRPO (planned lr and tuned), step-matched GRPO, "
                     "Prompt-GDRO, Rollout-GDRO and joint in a calibrated world, drawing its parameters from the fit.")
    parser.add_argument("world", type=Path, metavar="WORLD", help="world.toml written by gdro calibrate (fit.json beside it)")
    parser.add_argument("--draws", type=int, default=40, help="worlds drawn from the fit's posterior draws (default 40, "
                        "what gdro calibrate stores; at most as many as it stored)")
    parser.add_argument("--seeds", type=int, default=2, help="seeds per world, paired across methods (default 2)")
    parser.add_argument("--steps", type=int, help="training steps (default: the calibration's plan)")
    parser.add_argument("--batch", type=int, help="prompts per step (default: the plan's)")
    parser.add_argument("--lr", type=float, help="learning rate of the planned run (default: the reference lr)")
    parser.add_argument("--optimizer", choices=("adam", "sgd"), help="default: the calibration's")
    parser.add_argument("--threshold", type=float, default=1.0, metavar="PP",
                        help="a practical difference, in percentage points (default 1): the verdicts count the worlds "
                             "beyond it")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--bootstrap", type=int, default=0, metavar="B",
                        help="widen the intervals by this fit's own factor: refit B worlds drawn from the fit on "
                             "simulated data of the same shapes (default 0: the global factor)")
    parser.add_argument("--out", type=Path, help="output folder (default: <world folder>/predict)")
    return parser


def _predict_settings(args: argparse.Namespace, cal: predict.Calibrated) -> predict.Settings:
    from simulators.calibrate import predict  # noqa: F811  (the module, at run time)

    plan = cal.plan
    values = {"draws": min(args.draws, cal.draw_count) if args.draws > 0 else args.draws, "seeds": args.seeds,
              "steps": args.steps or plan["steps"], "batch": args.batch or plan["batch"], "workers": args.workers}
    for name, value in values.items():
        if not isinstance(value, int) or value < 1:
            raise ConfigError(f"--{name} {value}: must be an integer >= 1")
    if args.lr is not None and not args.lr > 0:
        raise ConfigError(f"--lr {args.lr}: must be > 0")
    if args.bootstrap < 0 or (args.bootstrap and not (cal.fit or {}).get("dynamics")):
        raise ConfigError(f"--bootstrap {args.bootstrap}: give 0 or more, and a world whose fit.json has a sweep")
    if not 0 <= args.threshold < 100:
        raise ConfigError(f"--threshold {args.threshold}: give percentage points in [0, 100)")
    lr_scale = (args.lr / plan["lr"]) if args.lr else 1.0
    return predict.Settings(out=args.out or cal.path.parent / "predict", lr_scale=lr_scale,
                            threshold=args.threshold / 100, optimizer=args.optimizer or plan["optimizer"],
                            n_bar=int(plan["n_bar"]), n_min=int(plan["n_min"]), n_max=int(plan["n_max"]),
                            bootstrap=args.bootstrap, **values)


def check_out_folder(out: Path, command: str) -> None:
    """``--out`` must be ``command``'s to write (gdro_lab.runformat.output: new, empty or its own): else a
    one-line ConfigError before any work, nothing written."""
    problem = output_problem(out, command)
    if problem is not None:
        raise ConfigError(f"--out {out} {problem}: give a new or empty folder, or one {command} wrote "
                          "(nothing was written)")


def check_world(world: Path) -> None:
    """``gdro predict WORLD``: an existing world.toml, or a folder holding one (one-line ConfigError)."""
    if world.is_dir() and not (world / "world.toml").is_file():
        raise ConfigError(f"WORLD {world} is a folder without world.toml: give the world.toml gdro calibrate wrote "
                          "(gdro calibrate --out DIR writes DIR/world.toml)")
    if not world.exists():
        raise ConfigError(f"WORLD {world} does not exist: give the world.toml gdro calibrate wrote "
                          "(gdro calibrate --out DIR writes DIR/world.toml)")


def predict_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `gdro predict`: one screen on stdout, then the report path (the work is
    simulators/calibrate/predict.py, the screen and report predict_report.py)."""
    from simulators.calibrate import predict
    from simulators.calibrate.predict_report import screen, write_report
    from simulators.reporting import prepare_output

    try:
        args = predict_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
        check_world(args.world)
        cal = predict.load(args.world)
        settings = _predict_settings(args, cal)
        check_out_folder(settings.out, "gdro predict")
        claim_output(settings.out, "gdro predict")
        prepare_output(settings.out)
        print(f"gdro predict: writing to {settings.out.resolve()}", file=sys.stderr, flush=True)  # the first line
        started = time.perf_counter()
        summary = predict.predict(cal, settings)
        if settings.bootstrap:  # this fit's own widening (simulators/calibrate/bootstrap.py)
            from simulators.calibrate.bootstrap import widened

            summary = widened(summary, cal, settings)
        seconds = time.perf_counter() - started
        text = screen(summary, settings, cal, seconds)
        report = write_report(summary, settings, text, settings.out)
    except (ConfigError, RunFormatError) as err:
        print(f"gdro predict: error: {err}", file=sys.stderr)
        return 2
    print(text)
    print(f"report: {report.resolve()}")
    return 0
