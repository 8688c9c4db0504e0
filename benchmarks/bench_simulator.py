"""Benchmark of the simulator: per-step cost by method and part, snapshot cost, the default study.

    python benchmarks/bench_simulator.py            # per-step tables and the bookkeeping share (~1 min)
    python benchmarks/bench_simulator.py --full     # also the default study (`gdro simulate`) end to end

Times are CPU seconds of this process (time.process_time) and wall seconds; on a shared machine
the wall time of the full study depends on what else runs, so both are printed with the load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gdro_lab import RunWriter  # noqa: E402
from simulators.loop import Simulation
from simulators.simulator_config import SimConfig  # noqa: E402
from simulators.simulator_methods import DEFAULT_METHODS  # noqa: E402
from simulators.world import WorldConfig  # noqa: E402


def per_step(method: str, steps: int, warmup: int, prompts: int, batch: int, log_every: int) -> dict[str, float]:
    """CPU ms per step: the training step alone (no record), the step record (step_record + SE
    report + signal), the JSON log line, and the bookkeeping share at ``log_every``."""
    world = WorldConfig(num_prompts=prompts, num_groups=min(32, prompts // 8))
    sim = Simulation(SimConfig(method=method, steps=warmup + 2 * steps, batch=batch, world=world))
    for _ in range(warmup):  # past the first epoch, so every prompt has a bin
        sim.step(record=False)
    start = time.process_time()
    for _ in range(steps):
        sim.step(record=False)
    core_ms = (time.process_time() - start) / steps * 1e3
    records = []
    start = time.process_time()
    for _ in range(steps):
        records.append(sim.step(record=True))
    with_record_ms = (time.process_time() - start) / steps * 1e3
    with tempfile.TemporaryDirectory() as tmp:
        writer = RunWriter(Path(tmp) / "run", {}, sim.config.num_bins, "bench")
        start = time.process_time()
        for t, (scalars, rows) in enumerate(records):
            writer.log_step(t, scalars, rows)
        log_ms = (time.process_time() - start) / steps * 1e3
        writer.close()
    record_ms = max(with_record_ms - core_ms, 0.0)
    book = (record_ms + log_ms) / log_every
    return {"core_ms": core_ms, "record_ms": record_ms, "log_ms": log_ms,
            "book_pct": 100 * book / (core_ms + book), "book1_pct": 100 * (record_ms + log_ms) /
            (core_ms + record_ms + log_ms)}


def full_study(workers: int) -> dict[str, float]:
    from simulators import cli
    with tempfile.TemporaryDirectory() as tmp:
        children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_before = time.process_time()
        start = time.perf_counter()
        code = cli.main(["curriculum", "--out", str(Path(tmp) / "cur"), "--workers", str(workers), "--no-progress"])
        wall = time.perf_counter() - start
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (time.process_time() - cpu_before) + (children.ru_utime - children_before.ru_utime) + (
            children.ru_stime - children_before.ru_stime)
        summary = json.loads((Path(tmp) / "cur" / "summary.json").read_text())
    return {"exit": code, "wall_s": wall, "cpu_s": cpu, "runs_wall_s": summary["wall_s"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="also time the default study (gdro simulate) end to end")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--log-every", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (1 min) at start")
    for prompts, batch, label in ((4000, 128, "quick default"), (14116, 256, "--full")):
        print(f"\n{label} world: {prompts:,} prompts, {batch} prompts/step, n_bar = 4, 10 bins; CPU ms per step")
        header = (f"{'method':<18} {'step':>7} {'record':>7} {'log':>6} {'bookkeeping':>12} "
                  f"{'(every step)':>13}")
        print(header)
        print("-" * len(header))
        for method in DEFAULT_METHODS:
            r = per_step(method, args.steps, 40, prompts, batch, args.log_every)
            print(f"{method:<18} {r['core_ms']:>7.2f} {r['record_ms']:>7.2f} {r['log_ms']:>6.2f} "
                  f"{r['book_pct']:>10.1f} % {r['book1_pct']:>11.1f} %")
    print(f"\nbookkeeping = (record + log) / log_every over the whole step, log_every = {args.log_every}; "
          "'(every step)' is the same with a record at every step.")
    if args.full:
        r = full_study(args.workers)
        print(f"default study (gdro simulate): exit {r['exit']}, wall {r['wall_s']:.1f} s "
              f"(runs {r['runs_wall_s']:.1f} s), CPU {r['cpu_s']:.1f} s, load average now "
              f"{os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
