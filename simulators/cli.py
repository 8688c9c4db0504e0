"""`gdro simulate [STUDY] [options]`: run a toy study in the heavy-tailed bandit world.

With no arguments it runs the default study (`curriculum`, quick size: GRPO, Prompt-GDRO and
Rollout-GDRO x 5 seeds, 400 steps, 4,000 prompts, each on a learning-rate grid of sqrt(2) steps
from 0.5 to 2 extended while its best point is at an edge, plus step-matched GRPO), writes everything under ``./gdro-runs/curriculum`` (never into the
repository), prints the decision and where the report is. ``--full`` runs the study at its full
size; ``--update-reports`` also copies the report into the repository's ``reports/<study>``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any, Callable

from studykit.args import did_you_mean, with_suggestion
from gdro_lab import ConfigError, RunFormatError
from simulators.studies import STUDIES

DEFAULT_STUDY = "curriculum"
RUNS_ROOT = "gdro-runs"
MODULES = {"curriculum": "curriculum_study", "sqrt-law": "sqrt_law_study", "surrogate": "surrogate",
           "ablation": "ablation", "arena": "allocation_arena"}
STUDY_HELP = {
    "curriculum": "all methods at equal budget, >= 5 seeds: accuracy, worst group, pass@8, support, waves",
    "sqrt-law": "weighted SE proxy of uniform vs Rollout-GDRO vs the square-root optimum; the staircase",
    "surrogate": "entropic surrogate vs max (Lemma 4.1) and the no-regret game's duality gap",
    "ablation": "full-factorial sweep: main effects and two-way interactions with CIs",
    "arena": "Knapsack-RL, VIP, per-prompt GDRO, DAPO, GRESO vs GRPO and the per-prompt oracle, 5 worlds",
}


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line and never exits the interpreter."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(f"{with_suggestion(message)} (see {self.prog} --help)")

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
    from gdro_lab.methods import METHODS
    from simulators.simulator_methods import method_names
    studies = "\n".join(f"  {name:<11} {STUDY_HELP[name]}" for name in STUDIES)
    studies += "\n\nmethods (--methods):\n" + "\n".join(f"  {m:<18} {METHODS[m].summary}" for m in method_names())
    parser = _Parser(
        prog="gdro simulate", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Toy studies in a heavy-tailed bandit world (docs/simulator.md). Each study writes run "
                    "directories (gdro run format) and a markdown report with figures into --out.",
        epilog=f"studies:\n{studies}\n\nWith no STUDY, runs `{DEFAULT_STUDY}` at its quick defaults (about a CPU "
               f"minute) into ./{RUNS_ROOT}/{DEFAULT_STUDY} and prints the decision.\nExamples:\n  gdro simulate\n"
               "  gdro simulate --full\n  gdro simulate --preset paper-1.7b\n"
               "  gdro simulate --set world.transfer=0.9 prompt_gdro.eta=0.4\n"
               "  gdro simulate --plugin mypkg.mymethods --methods grpo,my_method\n"
               "  gdro simulate sqrt-law --seeds 3\n  gdro sweep --grid world.curvature=0,0.15")
    parser.add_argument("study", nargs="?", default=DEFAULT_STUDY, choices=STUDIES, metavar="STUDY",
                        help=f"one of {', '.join(STUDIES)} (default {DEFAULT_STUDY})")
    parser.add_argument("--out", type=Path, help=f"output folder (default ./{RUNS_ROOT}/<study>)")
    parser.add_argument("--full", action="store_true", help="the study at its full size (all methods, paper scale)")
    parser.add_argument("--update-reports", nargs="?", const="", default=None, metavar="NAME",
                        help="also copy report.md, figures and summary.json into the repository's reports/<study>"
                             "[-full][-<preset>]; a run with --methods, --set, --config or --plugin must name its "
                             "report (--update-reports NAME), so it never replaces the default study's")
    parser.add_argument("--set", dest="assignments", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                        help="override any knob, e.g. --set world.transfer=0.5 prompt_gdro.eta=0.4 "
                             "(namespaces: world, run, classifier, prompt_gdro, rollout_gdro, gdro_prompt, "
                             "knapsack, vip, duet, cero, selector)")
    parser.add_argument("--config", type=Path, help="TOML file with [world], [run], [classifier], [prompt_gdro], "
                                                    "[rollout_gdro], ... tables, one per --set namespace (--set wins)")
    parser.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                        help="import MODULE first: it registers controllers in gdro_lab.controllers.registry.REGISTRY and "
                             "methods with gdro_lab.methods.register_method (repeatable)")
    parser.add_argument("--preset", help="world preset of a paper regime: paper-1.7b, paper-4b, paper-8b "
                                          "(applied before --config and --set)")
    parser.add_argument("--lr-grid", help="comma-separated starting learning-rate scales of the tuned baselines, "
                                          "at most sqrt(2) apart (curriculum, sqrt-law; default 0.5 to 2 in sqrt(2) "
                                          "steps; 1 is always added); a single value turns tuning off")
    parser.add_argument("--lr-extend", type=_nonnegative,
                        help="most sqrt(2) steps a method's grid grows beyond each end while its best val point "
                             "is there (default 8; 0 = never)")
    parser.add_argument("--log-every", type=_positive, help="steps between step records in steps.jsonl (default 10)")
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


def _floats(text: str, flag: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: write comma-separated numbers, e.g. 0.5,1,2") from None
    if not values or any(not 0 < v <= 1000 for v in values):
        raise ConfigError(f"{flag} {text!r}: every value must be in (0, 1000]")
    return values


def _settings(args: argparse.Namespace, module: Any) -> Any:
    from gdro_lab.methods import METHODS
    from simulators.simulator_methods import method_names
    from simulators import knobs
    from simulators.studies.common import StudySettings
    defaults = dict(module.DEFAULTS)
    if args.full:
        defaults.update(getattr(module, "FULL", {}))
    methods: tuple[str, ...] = ()
    if args.methods:
        methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
        unknown = [m for m in methods if m not in METHODS]
        if unknown or not methods:
            hint = did_you_mean(unknown[0], METHODS) if unknown else ""
            raise ConfigError(f"--methods: unknown method {unknown[0] if unknown else '(none)'!r}: "
                              f"{hint + ' ' if hint else ''}choose from {', '.join(method_names())}")
    elif args.full:
        methods = tuple(defaults.get("methods", ()))
    overrides: dict[str, dict[str, Any]] = {}
    if args.preset:
        from simulators.presets import preset_world
        overrides["world"] = preset_world(args.preset)
    if args.config:
        knobs.load_toml(args.config, overrides)
    knobs.parse_assignments(args.assignments, overrides)
    knobs.validate(overrides)
    world = {}
    if args.interference is not None:
        world["interference"] = args.interference
    pick = lambda name: getattr(args, name) if getattr(args, name) is not None else defaults[name]  # noqa: E731
    snapshot_seeds = pick("snapshot_seeds") if "snapshot_seeds" in defaults or args.snapshot_seeds is not None else 1
    lr_grid = _floats(args.lr_grid, "--lr-grid") if args.lr_grid else tuple(defaults.get("lr_grid", (1.0,)))
    from studykit.lrgrid import check_grid
    lr_grid = check_grid(lr_grid + (1.0,), "--lr-grid")
    return StudySettings(out=args.out or Path(RUNS_ROOT) / report_name(args.study, args.full, args.preset or ""), seeds=pick("seeds"), steps=pick("steps"),
                         prompts=pick("prompts"), batch=pick("batch"), workers=args.workers, methods=methods,
                         eval_every=args.eval_every or defaults.get("eval_every", 20),
                         snapshot_every=args.snapshot_every, snapshot_seeds=snapshot_seeds,
                         progress=args.progress, world=world, overrides=overrides, lr_grid=lr_grid,
                         log_every=args.log_every or defaults.get("log_every", 10), full=args.full,
                         preset=args.preset or "",
                         lr_extend=args.lr_extend if args.lr_extend is not None else defaults.get("lr_extend", 8))


def repository_reports() -> Path:
    """The checkout's reports/ folder (the simulator must be run from a source checkout to update it)."""
    root = Path(__file__).resolve().parent.parent
    if not (root / "pyproject.toml").is_file() or not (root / "reports").is_dir():
        raise ConfigError("--update-reports needs a source checkout of gdro-lab (pip install -e .): "
                          f"no reports/ folder next to {root / 'simulators'}")
    return root / "reports"


def report_name(study: str, full: bool = False, preset: str = "") -> str:
    """reports/ folder of a study: <study>[-full][-<preset>]."""
    return study + ("-full" if full else "") + (f"-{preset}" if preset else "")


def checked_report_name(name: str, command: str) -> str:
    """``name`` if it can name reports/<name> for ``--update-reports NAME`` of ``command``, else a ConfigError:
    letters, digits, '-', '_' and '.' (not first), and never a study's own name (its report is the study's)."""
    if name in STUDIES:
        raise ConfigError(f"--update-reports {name}: that is a study's report; " + (
            f"put the study first: gdro simulate {name} --update-reports" if command == "gdro simulate"
            else f"name this one otherwise, e.g. --update-reports {name}-sweep"))
    if not name.replace("-", "").replace("_", "").replace(".", "").isalnum() or name.startswith("."):
        raise ConfigError(f"--update-reports {name!r}: a report name is letters, digits, '-', '_' and '.' "
                          "(e.g. curriculum-all-methods)")
    return name


def updated_report_name(args: argparse.Namespace) -> str | None:
    """reports/<name> that ``--update-reports [NAME]`` writes, or None without the flag.

    Without NAME the name is the study's own (:func:`report_name`); a run whose methods or knobs differ
    from the study's defaults must name its report, else it would silently replace the default one."""
    if args.update_reports is None:
        return None
    if args.update_reports:
        return checked_report_name(args.update_reports, "gdro simulate")
    custom = [flag for flag, value in (("--methods", args.methods), ("--set", args.assignments),
                                       ("--config", args.config), ("--plugin", args.plugin)) if value]
    name = report_name(args.study, args.full, args.preset or "")
    if custom:
        raise ConfigError(f"--update-reports without a name would replace reports/{name} with a run of other "
                          f"settings ({', '.join(custom)}): name the report, e.g. --update-reports {name}-custom")
    return name


def update_reports(out: Path, study: str) -> Path:
    """Copy report.md, summary.json and fig_*.png from ``out`` into reports/<study> (old figures removed)."""
    import shutil
    target = repository_reports() / study
    if target.resolve() == out.resolve():
        return target / "report.md"
    target.mkdir(parents=True, exist_ok=True)
    for old in target.glob("fig_*.png"):
        old.unlink()
    for path in [out / "report.md", out / "summary.json", *sorted(out.glob("fig_*.png"))]:
        if path.exists():
            shutil.copy2(path, target / path.name)
    return target / "report.md"


def _provenance(study: str, argv: list[str], settings: Any) -> dict[str, Any]:
    """summary.json's provenance: the code digest of the study's modules, the command (without the
    machine's --out, --workers and progress flags) and the settings that made the report."""
    import dataclasses
    from studykit.provenance import provenance
    kept = {k: v for k, v in dataclasses.asdict(settings).items() if k not in ("out", "workers", "progress")}
    return provenance([f"simulators.studies.{MODULES[study]}", "simulators.cli"],
                      " ".join(["gdro simulate", *portable_words(argv)]), json.loads(json.dumps(kept, default=str)))


#: One machine's arguments, left out of a report's command: flags with a value, then switches.
MACHINE_FLAGS, MACHINE_SWITCHES = ("--out", "--workers"), ("--progress", "--no-progress")


def portable_words(argv: list[str]) -> list[str]:
    """The arguments without those of one machine (:data:`MACHINE_FLAGS`, :data:`MACHINE_SWITCHES`)."""
    from studykit.provenance import portable
    return portable(argv, drop=MACHINE_FLAGS, switches=MACHINE_SWITCHES)


def _load_plugins(names: list[str]) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as err:
            raise ConfigError(f"--plugin {name}: cannot import it ({err}): put it on PYTHONPATH or pip install it"
                              ) from None


def main(argv: list[str] | None = None) -> int:
    """Entry point of `gdro simulate`; returns the exit status (0 ok, 2 bad arguments or data)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(args_list)
        _load_plugins(args.plugin)
        module = importlib.import_module(f"simulators.studies.{MODULES[args.study]}")
        settings = _settings(args, module)
        settings.validate()
        settings.world_config()
        from simulators.reporting import claim_output
        target_report = updated_report_name(args)  # checked before any compute
        claim_output(settings.out)
        print(f"gdro simulate {args.study}: writing to {settings.out.resolve()}", file=sys.stderr, flush=True)
        made_by = _provenance(args.study, args_list, settings)  # the code as it stood when the run began
        report = module.run(settings)
        if (settings.out / "summary.json").is_file():
            from studykit.provenance import add_provenance
            add_provenance(settings.out / "summary.json", made_by)
        copied = update_reports(settings.out, target_report) if target_report else None
    except _Exit as done:
        return done.status
    except (ConfigError, RunFormatError) as err:
        print(f"gdro simulate: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gdro simulate: interrupted: runs finished under --out are kept (a rerun into it starts them again)",
              file=sys.stderr)
        return 130
    decision = Path(report).parent / "decision.txt"
    if decision.exists():
        print(decision.read_text(encoding="utf-8"), end="")
    print(f"report: {Path(report).resolve()}")
    if copied is not None:
        print(f"updated: {copied.resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
