"""Benchmark of `gdro calibrate` + `gdro predict` at their default settings, on data of the LM study's size.

    python benchmarks/bench_calibrate.py            # synthetic data like the LM study's, then both commands
    python benchmarks/bench_calibrate.py --lm-data runs/calib-data   # + the LM study's eval and sweep times

The data (made once, not timed) are those of a known simulator world the size of the CPU LM study
(``simulators.calibrate.recovery``): 3,200 training prompts in 5 groups sampled 8 times each, and a
plain-GRPO sweep at 4 learning rates x 60 steps of 64 prompts, written in the files `gdro eval
--save-samples` and `gdro train` write. Then, timed as a user runs them (each a fresh process):

    gdro calibrate --samples DATA/eval --sweep DATA/grpo-lr* --lr 1 --steps 200 --out OUT
    gdro predict OUT/world.toml                      (12 worlds x 2 seeds, 200 steps x 64 prompts, 2 workers)

It prints wall and CPU seconds of each and the machine's load; the target is under 10 minutes for
both on 2 cores (docs/benchmarks.md, section "Calibration").
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def make_data(folder: Path) -> tuple[Path, list[Path]]:
    from simulators.calibrate.recovery import LRS, synthetic_data, truth_world, write_as_real

    truth = truth_world("middle", num_prompts=3200, num_groups=5, seed=0)
    sample, sweep = synthetic_data(truth, lrs=LRS[:4], batch=64, n=4, steps=60, eval_every=20, k=8, seed=0)
    return write_as_real(sample, sweep, folder, k=8)


def timed(command: list[str]) -> tuple[float, float]:
    """(wall s, CPU s of the child and its workers) of one command in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                   stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - start, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def data_costs(folder: Path) -> list[str]:
    """Rows for the eval and the sweep from `gdro study lm --calibration-data`'s calibration-data.json."""
    import json

    record = json.loads((folder / "calibration-data.json").read_text(encoding="utf-8"))
    eval_s, total = float(record["eval_seconds"]), float(record["seconds"])
    return [f"| eval of the warm start ({record['pool_size']} prompts x 8 samples; incl. warm start if not cached) "
            f"| {eval_s:.0f} | - |",
            f"| GRPO sweep ({len(record['lrs'])} lrs x {record['steps']} steps) | {total - eval_s:.0f} | - |"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lm-data", type=Path, help="also report the eval and sweep times recorded in this "
                                                      "`gdro study lm --calibration-data` folder")
    parser.add_argument("--keep", type=Path, help="copy the calibration's outputs (world, fit, report, figures, "
                                                   "prediction report; not the simulated runs) into this folder")
    args = parser.parse_args()
    extra = data_costs(args.lm_data) if args.lm_data else []
    with tempfile.TemporaryDirectory(prefix="bench-calibrate-") as tmp:
        folder = Path(tmp)
        samples, runs = make_data(folder / "data")
        gdro = [sys.executable, "-m", "gdro_cli"]
        load = os.getloadavg()[0]
        cal = timed(gdro + ["calibrate", "--samples", str(samples), "--sweep", *map(str, runs), "--lr", "1",
                            "--steps", "200", "--out", str(folder / "cal")])
        pred = timed(gdro + ["predict", str(folder / "cal" / "world.toml")])
        load = max(load, os.getloadavg()[0])
        if args.keep:
            import shutil

            shutil.copytree(folder / "cal", args.keep, dirs_exist_ok=True, ignore=shutil.ignore_patterns("runs"))
    print("| command (defaults; LM-study-sized data) | wall s | CPU s |")
    print("|---|---|---|")
    print(f"| gdro calibrate | {cal[0]:.0f} | {cal[1]:.0f} |")
    print(f"| gdro predict (12 worlds x 2 seeds, 200 steps x 64 prompts) | {pred[0]:.0f} | {pred[1]:.0f} |")
    print(f"| both | {cal[0] + pred[0]:.0f} | {cal[1] + pred[1]:.0f} |")
    print("\n".join(extra))
    print(f"load average (1 min, highest seen): {load:.1f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
