"""`gdro` command line: dispatches to each part lazily so `gdro simulate` never loads streamlit.

The subcommands are :data:`COMMANDS` (``gdro --help`` lists them); each one's synopsis and where it
lives: docs/architecture.md#gdro_cli-main. Whatever a command leaves uncaught is one line here, never
a traceback (set ``GDRO_DEBUG=1`` for it): Ctrl-C says what was kept, a file system error names the
file and the fix.
"""

from __future__ import annotations

import importlib
import os
import sys

from studykit.args import did_you_mean

COMMANDS = {
    "simulate": ("simulators.cli", "main", "toy studies in the synthetic bandit world"),
    "sweep": ("simulators.knob_sweep", "main", "grid x seeds sweep of simulator knobs, gains over GRPO"),
    "app": ("apps.launch", "main", "Streamlit app for run directories"),
    "report": ("apps.report.cli", "main", "static PNG figures for run directories"),
    "eval": ("real_runs.eval_cli", "main", "mean@k / pass@k / worst group of a model on math benchmarks"),
    "train": ("real_runs.train_cli", "main", "train a model: GRPO, Prompt-GDRO, Rollout-GDRO, joint"),
    "export": ("real_runs.export_cli", "main", "a run's checkpoint as a Hugging Face folder (eval, vLLM)"),
    "study": ("gdro_cli.study_provenance", "main", "learning study on CPU: GRPO vs GDRO on a small Qwen3"),
    "arena": ("gdro_cli.arena", "main", "allocation arena: Knapsack-RL, VIP, DAPO, GRESO, per-prompt GDRO vs GRPO"),
    "calibrate": ("simulators.calibrate.cli", "calibrate_main", "fit the simulator world to a real model (eval + lr sweep)"),
    "predict": ("simulators.calibrate.cli", "predict_main", "each method's predicted gain in a calibrated world"),
    "data": ("real_runs.datafetch", "main", "gdro data fetch: DAPO-Math-17k and the benchmarks, pinned and checked"),
}


def _usage() -> str:
    lines = ["usage: gdro COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<10} {help_}" for name, (_, _, help_) in COMMANDS.items()]
    lines += ["", "Run `gdro COMMAND --help` for the options of one command."]
    return "\n".join(lines)


def version() -> str:
    """The installed gdro-lab's version (its package metadata), or a note when it is not installed."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed
    try:
        return installed("gdro-lab")
    except PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"


#: What a Ctrl-C leaves behind, by command (the trainer says it itself: its run is resumable).
INTERRUPTED = {
    "simulate": "runs finished under --out are kept (a rerun into it starts them again)",
    "sweep": "runs finished under --out are kept (a rerun into it starts them again)",
    "arena": "finished runs under --out are kept and reused by a rerun",
    "eval": "no results were written (they are written at the end)",
    "calibrate": "the fit was not written; rerun the same command",
    "predict": "the prediction was not written; rerun the same command",
    "report": "figures already drawn are kept; rerun with --overwrite",
    "export": "OUT was not written (the export is renamed into place at the end)",
    "data": "files already checked are kept; a rerun fetches the rest",
}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    if args[0] in ("-V", "--version", "version"):
        print(f"gdro {version()}")
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        hint = did_you_mean(name, COMMANDS)
        print(f"gdro: unknown command {name!r}: {hint + ' ' if hint else ''}choose one of {', '.join(COMMANDS)}",
              file=sys.stderr)
        return 2
    module_name, func_name, _ = COMMANDS[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        extra = {"simulate": "sim", "sweep": "sim", "app": "app", "report": "sim", "calibrate": "sim",
                 "predict": "sim"}.get(name, "train")
        print(f"gdro {name}: missing dependency ({err.name}): install with pip install -e '.[{extra}]'",
              file=sys.stderr)
        return 2
    try:
        result = getattr(module, func_name)(rest)
    except KeyboardInterrupt:
        if os.environ.get("GDRO_DEBUG"):
            raise
        print(f"gdro {name}: interrupted: {INTERRUPTED.get(name, 'files already written are kept')}",
              file=sys.stderr)
        return 130
    except OSError as err:  # what a command did not catch: a full disk, a folder it may not write
        if os.environ.get("GDRO_DEBUG"):
            raise
        where = f": {err.filename}" if err.filename else ""
        print(f"gdro {name}: error: {err.strerror or err}{where}: check the path and its permissions "
              "(GDRO_DEBUG=1 for the traceback)", file=sys.stderr)
        return 2
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
