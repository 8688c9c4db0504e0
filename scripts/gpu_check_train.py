"""Stage "train" of scripts/gpu_check.sh: `gdro train` with ragged arms, a checkpoint and a resume.

The ``tiny-cpu`` preset (tiny random Qwen3, real DAPO-Math-17k rows, the known-odds toy reward so the
bins spread on a model that solves nothing) with ``method.name=joint`` (Prompt-GDRO multipliers and
Rollout-GDRO arms) on ``--device``:

1. steps 1..STOP in this process, ending with a checkpoint and status "stopped" (``stop_after``,
   as ``gdro train --rehearse`` does);
2. ``gdro train --resume RUN_DIR`` (the CLI, a new process) runs STOP+1..STEPS, evaluation at the end;
3. checks on the run directory: steps 1..STEPS once each, status finished, every step's rollouts
   exactly prompts x n_bar, every arm within [n_min, n_max], some step ragged (a bin above n_bar
   and one below at that exact total), some multiplier != 1, a checkpoint at STOP (before the
   resume) and at STEPS, the
   CUDA device used when asked (peak memory > 0).

Prints one line per check and writes the key numbers to ``--json``. Exit 0 passed, 1 a check
failed (the line says which), 2 bad input.

    python scripts/gpu_check_train.py --device cuda --work /tmp/w --json train.json
    python scripts/gpu_check_train.py --device cpu --steps 4 --stop 2 --prompts 4 ...   # dry mode
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def overrides(args: argparse.Namespace) -> list[str]:
    """The preset overrides of the check (prompts recur every 2 steps so every prompt gets a bin)."""
    return [f"model.device={args.device}", "method.name=joint", f"train.steps={args.steps}",
            f"train.prompts_per_step={args.prompts}", f"data.limit={2 * args.prompts}", "train.save_every=2",
            f"rollout.max_new_tokens={args.new_tokens}", f"eval.every={args.steps}", "eval.limit=4",
            f"eval.max_new_tokens={args.new_tokens}", f"train.out={json.dumps(str(args.work))}",
            "train.run_name=gpu-check", "train.progress=false"]


def strict_numbers(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, inf) replaced by None, so ``json.dumps(..., allow_nan=False)``
    writes strict JSON (``NaN`` is not JSON: ``jq`` and most parsers refuse it)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: strict_numbers(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_numbers(item) for item in value]
    return value


def bench_numbers(rows: dict[str, dict[str, Any]], attention: str | None) -> dict[str, Any]:
    """Stage "bench" of scripts/gpu_check.sh: the key numbers of benchmarks/bench_train.py's rows, strict JSON.

    ``mfu_pct`` is null, with ``mfu_null_reason``, where the device has no entry in the benchmark's
    peak-FLOPS table (``PEAK_BF16``: a GPU it does not list, or the CPU); ``attention`` says which
    attention implementation the benchmark's model used."""
    numbers: dict[str, Any] = {}
    for method, row in rows.items():
        kept = {key: row.get(key) for key in BENCH_KEYS}
        mfu = kept["mfu_pct"]
        if not (isinstance(mfu, (int, float)) and math.isfinite(mfu)):
            kept["mfu_null_reason"] = ("no peak bf16 FLOPS for this device in benchmarks/bench_train.py's PEAK_BF16 "
                                       "table (add the GPU there)")
        numbers[method] = strict_numbers(kept)
    numbers["attention"] = attention or "unknown (benchmarks/bench_train.py did not record it)"
    return numbers


BENCH_KEYS = ("time/step", "tokens_per_s", "gen_tokens_per_s", "train_tokens_per_s", "mfu_pct", "peak_memory_gb",
              "controllers_share_pct")


def check(ok: bool, what: str, failures: list[str]) -> None:
    print(f"gpu_check train: {'ok  ' if ok else 'FAIL'} {what}", flush=True)
    if not ok:
        failures.append(what)


def verify(run_dir: Path, args: argparse.Namespace, cfg: Any,
           stopped_at: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The checks of the module docstring on the finished run; returns (numbers, failures)."""
    import numpy as np

    from gdro_lab.runformat.runlog import read_run

    run = read_run(run_dir)
    mc, failures = cfg.method, list[str]()
    total = args.prompts * mc.n_bar
    arms = run.bins["rollouts"]
    assigned = np.isfinite(arms)
    ragged = [int(s) for s, row in zip(run.steps, arms)
              if np.nanmax(row, initial=0) > mc.n_bar and np.nanmin(np.where(np.isfinite(row), row, np.inf)) < mc.n_bar]
    multipliers = run.bins["multiplier"][np.isfinite(run.bins["multiplier"])]
    ckpts = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    check(run.meta.get("status") == "finished", f"status {run.meta.get('status')!r} (finished)", failures)
    check(run.steps.tolist() == list(range(1, args.steps + 1)), f"steps {run.steps.tolist()} once each", failures)
    check(bool(np.all(run.scalars["total_rollouts"] == total)),
          f"rollouts per step {sorted(set(run.scalars['total_rollouts'].tolist()))} = {args.prompts} x {mc.n_bar}", failures)
    lo, hi = (float(arms[assigned].min()), float(arms[assigned].max())) if assigned.any() else (float("nan"),) * 2
    check(assigned.any() and mc.n_min <= lo and hi <= mc.n_max, f"arms {lo:g}..{hi:g} within [{mc.n_min}, {mc.n_max}]",
          failures)
    check(bool(ragged), f"ragged plans (a bin above n_bar={mc.n_bar} and one below) at steps {ragged}", failures)
    spread = float(np.max(np.abs(multipliers - 1.0))) if multipliers.size else 0.0
    check(spread > 1e-6, f"multipliers {multipliers.min():.3f}..{multipliers.max():.3f} (some != 1)"
          if multipliers.size else "multipliers logged", failures)
    check(f"step_{args.stop:08d}" in stopped_at, f"checkpoint step_{args.stop:08d} at the stop ({stopped_at})",
          failures)
    check(f"step_{args.steps:08d}" in ckpts, f"final checkpoint step_{args.steps:08d} ({ckpts})", failures)
    peak = float(np.nanmax(run.scalars["perf/peak_memory_gb"]))
    if args.device == "cuda":
        check(peak > 0, f"CUDA peak memory {peak:.3f} GB > 0", failures)
    numbers = {"steps": args.steps, "resumed_from": args.stop, "prompts_per_step": args.prompts,
               "total_rollouts_per_step": total, "arms_min": lo, "arms_max": hi, "ragged_steps": ragged,
               "multiplier_min": float(multipliers.min()) if multipliers.size else None,
               "multiplier_max": float(multipliers.max()) if multipliers.size else None,
               "step_seconds_median": float(np.median(run.scalars["time/step"])), "peak_memory_gb": peak,
               "device": args.device, "checkpoints_at_stop": stopped_at, "checkpoints": ckpts}
    return numbers, failures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/gpu_check_train.py", description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--work", type=Path, required=True, help="folder for the run directory (must not hold one)")
    parser.add_argument("--json", type=Path, help="write the key numbers here")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--stop", type=int, default=4, help="stop with a checkpoint after this step, then resume")
    parser.add_argument("--prompts", type=int, default=8, help="prompts per step")
    parser.add_argument("--new-tokens", type=int, default=32)
    args = parser.parse_args(argv)
    if not 1 <= args.stop < args.steps:
        print("gpu_check train: --stop must be at least 1 and below --steps", file=sys.stderr)
        return 2
    from real_runs import train
    from real_runs.config import load_config

    cfg = load_config("tiny-cpu", overrides(args))
    started = time.perf_counter()
    run_dir = train.main(cfg, stop_after=args.stop)
    first = time.perf_counter() - started
    print(f"gpu_check train: steps 1..{args.stop} in {first:.1f} s, stopped with a checkpoint: {run_dir}", flush=True)
    stopped_at = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    resumed = subprocess.run([sys.executable, "-m", "gdro_cli.main", "train", "--resume", str(run_dir)],
                             cwd=REPO, env=env, check=False)
    second = time.perf_counter() - started - first
    if resumed.returncode != 0:
        print(f"gpu_check train: FAIL gdro train --resume exited {resumed.returncode}", flush=True)
        return 1
    print(f"gpu_check train: resumed to step {args.steps} in {second:.1f} s (gdro train --resume)", flush=True)
    numbers, failures = verify(run_dir, args, cfg, stopped_at)
    numbers.update(seconds_first=round(first, 1), seconds_resume=round(second, 1), failures=failures)
    if args.json:
        args.json.write_text(json.dumps(strict_numbers(numbers), indent=1, allow_nan=False) + "\n")
    print(f"gpu_check train: {'PASSED' if not failures else 'FAILED: ' + '; '.join(failures)}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
