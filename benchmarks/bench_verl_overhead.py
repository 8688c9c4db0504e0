"""The verl plugin's own seconds per step, inside one launch of verl's real ``fit()`` (verl venv only).

    OMP_NUM_THREADS=1 .venv-verl/bin/python benchmarks/bench_verl_overhead.py [--steps 12] [--strategy fsdp2] [overrides]

One launch of the CPU launcher (``python -m real_runs.verl.cpu``: 2 ranks over gloo, the ``hf_cpu``
rollout, the smoke's tiny Qwen3 and toy data, Prompt-GDRO + Rollout-GDRO, full determinism, no
checkpoints); other arguments are hydra overrides (``gdro.allocator=uniform`` ...). Per step, from
verl's file logger: ``timing_s/gdro``, the seconds of the plugin's hooks (the plan, the planned
expansion of both batches, observe with the run directory, the clip and the mask; logged by
``GDRORayPPOTrainer``), against verl's ``timing_s/step`` of the same step. Both are measured in the
same step of the same process, so a load that slows the machine slows both, and their ratio
resolves what comparing launches cannot (plain verl's step varies by a sixth between two launches).
The plan runs before verl's step timer starts, so the share is high by the plan's share (under a
millisecond here). Prints the median, quartiles and range over steps 2..N (step 1 is warm-up).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def launch(folder: Path, steps: int, strategy: str, overrides: list[str]) -> dict[int, dict]:
    """Run the CPU launcher once; verl's tracker records by step."""
    from real_runs.verl import smoke

    smoke.prepare(folder)
    args = [sys.executable, "-m", "real_runs.verl.cpu", "--strategy", strategy,
            *smoke.overrides(folder, steps, save_freq=-1, ranks=2), "trainer.resume_mode=disable",
            "trainer.logger=[console,file]", "actor_rollout_ref.rollout.full_determinism=true", *overrides]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
           "VERL_FILE_LOGGER_PATH": str(folder / "tracker.jsonl")}
    with open(folder / "log.txt", "w") as log:
        rc = subprocess.run(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        raise SystemExit(f"the launch failed (exit {rc}): see {folder / 'log.txt'}")
    lines = (folder / "tracker.jsonl").read_text().splitlines()
    return {int(r["step"]): r["data"] for r in map(json.loads, lines)}


def summary(values: list[float]) -> str:
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return f"{median:.4g} | {q1:.4g} - {q3:.4g} | {min(values):.4g} - {max(values):.4g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12, help="training steps of the launch (default 12)")
    parser.add_argument("--strategy", choices=("fsdp", "fsdp2"), default="fsdp2", help="verl's FSDP version")
    parser.add_argument("--out", default=None, help="keep the launch's files here (default: a temporary folder)")
    args, overrides = parser.parse_known_args()
    if args.steps < 3:
        raise SystemExit(f"--steps {args.steps} is too few: steps 2..N are measured, use 3 or more")
    with tempfile.TemporaryDirectory(prefix="bench_verl_overhead_") as tmp:
        folder = Path(args.out) if args.out else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        load_before, start = os.getloadavg()[0], time.perf_counter()
        tracker = launch(folder, args.steps, args.strategy, overrides)
        wall, load_after = time.perf_counter() - start, os.getloadavg()[0]
    kept = [s for s in sorted(tracker) if s > 1]
    gdro = [float(tracker[s]["timing_s/gdro"]) for s in kept]
    step = [float(tracker[s]["timing_s/step"]) for s in kept]
    share = [100 * g / t for g, t in zip(gdro, step)]
    print(f"one launch, {args.strategy}, {args.steps} steps, {wall:.0f} s wall, "
          f"load average {load_before:.1f} -> {load_after:.1f}")
    print(f"\n| per step (steps 2..{args.steps}, {len(kept)} steps) | median | quartiles | range |")
    print("|---|---:|---:|---:|")
    print(f"| the plugin, `timing_s/gdro` (ms) | {summary([1e3 * g for g in gdro])} |")
    print(f"| verl's step, `timing_s/step` (s) | {summary(step)} |")
    print(f"| **share of the step (%)** | {summary(share)} |")


if __name__ == "__main__":
    main()
