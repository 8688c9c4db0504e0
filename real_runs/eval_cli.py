"""`gdro eval`: mean@k, pass@k and worst group of a model on math benchmarks.

    gdro eval --model ID_OR_PATH --benchmarks math500,aime24,aime25,amc23,minerva,olympiadbench,gpqa \\
              --k 8 [--n N] [--limit N] [--out RUN_DIR | --run RUN_DIR [--step S]] [--engine hf|vllm]

Default sampling is the paper's validation sampling (temperature 0.6, top-p 0.8, top-k 20) with the
released scripts' 4,096 response tokens; ``--n`` samples per prompt (default ``--k``), scored by
:mod:`real_runs.eval_scoring`, metrics of :mod:`real_runs.eval_metrics`. Results go to ``eval.jsonl`` of
a new run (``--out``) or an existing trainer run (``--run``, :func:`append_eval`). Bad input is a
one-line error and exit code 2. The record's step: docs/eval-notes.md#real_runs-eval_cli.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import math_verify  # noqa: F401  (a dependency check: without it gdro eval stops here, with the `train` extra hint)
import numpy as np

from studykit.args import OneLineParser, did_you_mean
from gdro_lab._validate import ConfigError
from gdro_lab.runformat.output import MARKER, claim_output, output_problem
from gdro_lab.runformat.runlog import EVAL_FILE, RunFormatError, RunWriter, read_run, to_jsonable
from real_runs.data import BENCHMARKS, DataError, load_dataset_records
from real_runs.engines import make_engine
from real_runs.eval_metrics import evaluation_metrics, stats_metrics, worst_names
from real_runs.eval_scoring import generate_and_score
from real_runs.export import weights_problem
from real_runs.models import ModelError, checkpoint_folder, load_policy
from real_runs.progress import phase
from real_runs.rewards.choice import ChoiceReward, reward_kind
from real_runs.rewards.math import MathReward
from real_runs.rewards.pool import PoolStartError
from real_runs.types import Problem, SamplingParams

DEFAULT_BENCHMARKS = "math500,aime24,aime25,amc23,minerva,olympiadbench,gpqa"  # the paper's pooled validation set


class EvalError(ValueError):
    """Bad input for `gdro eval`; the message names the problem and the fix."""


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="gdro eval", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True,
                        help="Hugging Face id, local folder, RUN_DIR[/checkpoints/step_N] of gdro train, or 'tiny'")
    parser.add_argument("--benchmarks", default=DEFAULT_BENCHMARKS,
                        help=f"comma-separated, from: {', '.join(BENCHMARKS)}")
    parser.add_argument("--k", type=int, default=8, help="k of mean@k and pass@k")
    parser.add_argument("--n", type=int, default=None, help="samples per prompt (default: k)")
    parser.add_argument("--limit", type=int, default=None, help="first N problems per benchmark")
    parser.add_argument("--out", default=None, help="new run directory (default runs/eval-<time>)")
    parser.add_argument("--run", default=None, help="existing run directory to append to")
    parser.add_argument("--step", type=int, default=None,
                        help="step of the record (default: the checkpoint's step, else the last step of --run, else 0)")
    parser.add_argument("--engine", choices=("hf", "vllm"), default="hf")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--dtype", default="auto", help="auto, float32, bfloat16 or float16")
    parser.add_argument("--temperature", type=float, default=0.6)
    parser.add_argument("--top-p", type=float, default=0.8)
    parser.add_argument("--top-k", type=int, default=20)
    parser.add_argument("--max-new-tokens", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-prompts", type=int, default=64, help="prompts per generate call")
    parser.add_argument("--max-batch-tokens", type=int, default=None,
                        help="hf engine: KV-cache budget per generate call, rows x (prompt + new tokens)")
    parser.add_argument("--reward-workers", type=int, default=None,
                        help="math reward worker processes (default: one per usable core)")
    parser.add_argument("--reward-timeout", type=float, default=5.0, help="seconds per response")
    parser.add_argument("--num-boot", type=int, default=1000, help="bootstrap replicates")
    parser.add_argument("--save-samples", action="store_true",
                        help="also write every response to eval_samples_step<S>.jsonl")
    return parser


def check_args(args: argparse.Namespace) -> list[str]:
    """Validate the options that need no file access; returns the benchmark names."""
    names = [b.strip() for b in args.benchmarks.split(",") if b.strip()]
    unknown = [b for b in names if b not in BENCHMARKS]
    if unknown or not names:
        hint = did_you_mean(unknown[0], BENCHMARKS) if unknown else ""
        raise EvalError(f"unknown benchmark {unknown[0] if unknown else '(none)'!r}: "
                        f"{hint + ' ' if hint else ''}choose from {', '.join(BENCHMARKS)}")
    args.n = args.k if args.n is None else args.n
    if args.k < 1:
        raise EvalError(f"--k {args.k}: use k >= 1")
    if args.k > args.n:
        raise EvalError(f"--k {args.k} is larger than the {args.n} samples per prompt: "
                        "raise --n or lower --k")
    for name in ("limit", "batch_prompts", "reward_workers", "num_boot", "max_new_tokens",
                 "max_batch_tokens"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise EvalError(f"--{name.replace('_', '-')} {value}: use a positive integer")
    if args.out and args.run:
        raise EvalError("give either --out (a new run) or --run (an existing run), not both")
    if not args.temperature >= 0:
        raise EvalError(f"--temperature {args.temperature}: use 0 (greedy) or more (the paper's 0.6)")
    if not 0 < args.top_p <= 1:
        raise EvalError(f"--top-p {args.top_p}: use a value in (0, 1] (1 turns the filter off; the paper's 0.8)")
    if args.top_k < 0:
        raise EvalError(f"--top-k {args.top_k}: use 0 (off) or more (the paper's 20)")
    if not args.reward_timeout > 0:
        raise EvalError(f"--reward-timeout {args.reward_timeout}: use a positive number of seconds")
    return names


def checkpoint_step(model: str) -> int | None:
    """The training step of a gdro train checkpoint: ``.../checkpoints/step_00000006`` -> 6, a run
    directory -> its newest checkpoint's step (as ``--model`` loads it); None for anything else."""
    folder = checkpoint_folder(Path(model))
    match = re.fullmatch(r"step_(\d+)", folder.name)
    return int(match.group(1)) if match and folder.parent.name == "checkpoints" else None


def _check_outputs(args: argparse.Namespace) -> None:
    """Fail before any compute when the model's weights are damaged or the results could not be written;
    settles ``args.step``."""
    damaged = weights_problem(checkpoint_folder(Path(args.model))) if Path(args.model).is_dir() else None
    if damaged is not None:
        raise EvalError(f"--model {damaged}: give an intact checkpoint (nothing was written)")
    if args.step is None:
        args.step = checkpoint_step(args.model)
    if args.run:
        try:
            run = read_run(args.run)
        except RunFormatError as err:
            raise EvalError(f"--run {err}") from None
        producer = str(run.meta.get("producer", ""))
        if "simulator" in producer:  # a simulated policy: no model was evaluated there
            raise EvalError(f"--run {args.run} is a run of {producer!r}: gdro eval appends only to runs of a model's "
                            "training (gdro train, the verl plugin) or of gdro eval; give --out for a new run "
                            "(nothing was written)")
        if args.step is None:
            args.step = int(run.steps[-1]) if run.steps.size else 0
        _check_tail(Path(args.run) / EVAL_FILE)
    else:
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        args.out = args.out or os.path.join("runs", f"eval-{stamp}")
        out = Path(args.out)
        if (out / "meta.json").exists():
            raise EvalError(f"{args.out} already holds a run: choose another --out, or pass it "
                            "as --run to append (nothing was overwritten)")
        problem = output_problem(out, "gdro eval")  # new, empty or its own (claimed once the data has loaded)
        if problem is not None:
            raise EvalError(f"--out {args.out} {problem}: gdro eval writes only into new or empty folders; "
                            "choose another --out (nothing was touched)")


def _check_tail(path: Path) -> None:
    if path.exists() and path.stat().st_size:
        with open(path, "rb") as handle:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                raise EvalError(f"{path} ends with a half-written line (a writer crashed or is "
                                "writing now): retry later, or delete that last line")


def append_eval(run_dir: str | os.PathLike[str], step: int, metrics: dict[str, Any]) -> None:
    """Append one record to an existing run's eval.jsonl, in ``RunWriter.log_eval``'s format.

    Safe next to a live trainer: one ``O_APPEND`` write of one whole line (atomic against other
    appenders on a local file system), fsynced; meta.json, steps.jsonl and earlier records are
    never touched. (``RunWriter.resume`` would rewrite meta.json and drop later records.)
    """
    path = Path(run_dir) / EVAL_FILE
    _check_tail(path)
    line = json.dumps({"step": int(step), "metrics": to_jsonable(metrics)}, allow_nan=False) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def load_problems(names: Sequence[str], limit: int | None) -> list[Problem]:
    """The problems of every benchmark, in order (one-line error on a missing file)."""
    try:
        problems = [p for name in names for p in load_dataset_records(name, limit=limit)]
    except DataError as err:
        raise EvalError(str(err)) from None
    if not problems:
        raise EvalError(f"no usable problems in {', '.join(names)}: check the data files")
    return problems


def format_table(metrics: dict[str, float], names: Sequence[str], k: int) -> str:
    """A plain-text table: one row per benchmark, pooled, worst group and worst benchmark."""
    def cell(name: str) -> str:
        lo, hi = metrics[name + "_lo"], metrics[name + "_hi"]
        bounds = "  (one prompt: no CI)" if lo != lo or hi != hi else f" [{100 * lo:6.2f}, {100 * hi:6.2f}]"
        return f"{100 * metrics[name]:6.2f}{bounds}"

    worst_group, worst_bench = worst_names(metrics, k)
    header = f"{'benchmark':<28} {'prompts':>7}  {f'mean@{k} % [95% CI]':<26}  {f'pass@{k} % [95% CI]':<26}"
    lines = [header, "-" * len(header)]
    for name in list(names) + ["pooled"]:
        lines.append(f"{name:<28} {int(metrics[f'{name}/num_prompts']):>7}  "
                     f"{cell(f'{name}/mean@{k}'):<26}  {cell(f'{name}/pass@{k}'):<26}")
    lines.append(f"{'worst group: ' + worst_group:<28} {'':>7}  {cell(f'worst_group/mean@{k}'):<26}")
    lines.append(f"{'worst benchmark: ' + worst_bench:<28} {'':>7}  {cell(f'worst_benchmark/mean@{k}'):<26}")
    return "\n".join(lines)


def _load_engine(args: argparse.Namespace) -> tuple[Any, Any]:
    try:
        model, tokenizer = load_policy(args.model, device=args.device, dtype=args.dtype, seed=args.seed)
        options = ({"max_batch_tokens": args.max_batch_tokens}  # an hf engine setting; vLLM batches itself
                   if args.max_batch_tokens is not None and args.engine == "hf" else {})
        return make_engine(args.engine, model, tokenizer, **options), tokenizer
    except ModelError as err:
        raise EvalError(str(err)) from None
    except ImportError as err:
        raise EvalError(f"engine {args.engine!r} needs {err.name}: install it with "
                        f"pip install -e '.[{args.engine if args.engine == 'vllm' else 'train'}]'") from None


def _write(args: argparse.Namespace, metrics: dict[str, float], samples: list[dict[str, Any]]) -> Path:
    if args.run:
        target, step = Path(args.run), int(args.step)
        append_eval(target, step, metrics)
    else:
        target, step = Path(args.out), int(args.step or 0)
        config = {"eval": {key: value for key, value in vars(args).items() if key != "run"}}
        with RunWriter(target, config, num_bins=1, producer="gdro eval", bin_labels=["all"]) as writer:
            writer.log_eval(step, metrics)
    if args.save_samples:
        with open(target / f"eval_samples_step{step}.jsonl", "a", encoding="utf-8") as handle:
            handle.writelines(json.dumps(s) + "\n" for s in samples)
    return target


def _progress(line: str) -> None:
    """A progress line on stdout, before the table (stderr holds only an error's one line), flushed at
    once (a log file shows it live)."""
    print(line, flush=True)


def run(args: argparse.Namespace) -> dict[str, float]:
    """The whole evaluation for parsed arguments; raises EvalError on bad input."""
    names = check_args(args)
    _check_outputs(args)
    problems = load_problems(names, args.limit)
    created = not args.run and not Path(args.out).exists()
    if not args.run:
        try:
            claim_output(args.out, "gdro eval")  # an unwritable --out fails here, before the model loads
        except ConfigError as err:
            raise EvalError(str(err)) from None
    _progress(f"gdro eval: run directory {args.run or args.out} "
              f"({'appending to a run' if args.run else 'a new run'}; results once every benchmark is scored)")
    try:
        with phase(f"model load ({args.model} on {args.device}, engine {args.engine})", out=_progress,
                   prefix="gdro eval: "):
            engine, tokenizer = _load_engine(args)
    except EvalError:
        if created and [p.name for p in Path(args.out).iterdir()] == [MARKER]:
            shutil.rmtree(args.out)  # a model that does not load leaves no trace of this run
        raise
    sampling = SamplingParams(args.temperature, args.top_p, args.top_k, args.max_new_tokens, args.seed)
    start = time.perf_counter()
    kinds = {reward_kind(p.source) for p in problems}
    rewards: dict[str, Any] = {"choice": ChoiceReward()}
    if "math" in kinds:
        rewards["math"] = MathReward(args.reward_timeout, args.reward_workers)
    try:
        successes_R, stats, samples = generate_and_score(
            problems, engine, tokenizer, args.n, sampling, args.batch_prompts, rewards,
            log=_progress, keep_samples=args.save_samples)
    finally:
        for reward in rewards.values():
            reward.close()
    metrics = evaluation_metrics(successes_R, np.full(len(problems), args.n),
                                 [p.source for p in problems], [p.group for p in problems], args.k,
                                 num_boot=args.num_boot, seed=args.seed)
    metrics.update(stats_metrics(stats, len(problems) * args.n, time.perf_counter() - start))
    target = _write(args, metrics, samples)
    print(format_table(metrics, names, args.k))
    print(f"gdro eval: wrote {target / EVAL_FILE} (step {int(args.step or 0)})")
    return metrics


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        run(args)
    except (EvalError, RunFormatError, PoolStartError) as err:
        print(f"gdro eval: {err}", file=sys.stderr)
        return 2
    return 0
