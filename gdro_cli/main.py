"""`gdro` command line: dispatches to each part lazily so `gdro simulate` never loads streamlit.

The subcommands are :data:`COMMANDS` (``gdro --help`` lists them); each one's synopsis and where it
lives: docs/design-notes.md#gdro_cli-main.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "simulate": ("simulators.cli", "main", "toy studies in the synthetic bandit world"),
    "sweep": ("simulators.sweep", "main", "grid x seeds sweep of simulator knobs, gains over GRPO"),
    "app": ("apps.launch", "main", "Streamlit app for run directories"),
    "report": ("apps.report.cli", "main", "static PNG figures for run directories"),
    "eval": ("real_runs.eval_cli", "main", "mean@k / pass@k / worst group of a model on math benchmarks"),
    "train": ("real_runs.train_cli", "main", "train a model: GRPO, Prompt-GDRO, Rollout-GDRO, joint"),
    "export": ("real_runs.export_cli", "main", "a run's checkpoint as a Hugging Face folder (eval, vLLM)"),
    "study": ("real_runs.lmstudy.cli", "main", "learning study on CPU: GRPO vs GDRO on a small Qwen3"),
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


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"gdro: unknown command {name!r}: choose one of {', '.join(COMMANDS)}", file=sys.stderr)
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
    result = getattr(module, func_name)(rest)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
