"""Benchmark of the simulator: per-step cost by method and part, snapshot cost, the default study.

    python benchmarks/bench_simulator.py            # per-step table (~30 s)
    python benchmarks/bench_simulator.py --full     # also the default `curriculum` study end to end

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
from gdro_lab.runlog import encode_state  # noqa: E402
from simulators.loop import SimConfig, Simulation  # noqa: E402
from simulators.methods import DEFAULT_METHODS  # noqa: E402
from simulators.world import sample_rollouts  # noqa: E402


def per_step(method: str, steps: int, warmup: int) -> dict[str, float]:
    """CPU ms per step: the whole step (world + controllers + record), the JSON log line, the world alone."""
    sim = Simulation(SimConfig(method=method, steps=warmup + steps))
    for _ in range(warmup):  # past the first epoch, so every prompt has a bin
        sim.step()
    with tempfile.TemporaryDirectory() as tmp:
        writer = RunWriter(Path(tmp) / "run", {}, sim.config.num_bins, "bench")
        records = []
        start = time.process_time()
        for _ in range(steps):
            records.append(sim.step())
        step_ms = (time.process_time() - start) / steps * 1e3
        start = time.process_time()
        for t, (scalars, rows) in enumerate(records):
            writer.log_step(t, scalars, rows)
        log_ms = (time.process_time() - start) / steps * 1e3
        start = time.process_time()
        state = sim.state_dict()
        payload = json.dumps(encode_state(state))
        encode_s = time.process_time() - start
        start = time.process_time()
        writer.save_snapshot(1, state)
        save_s = time.process_time() - start
        writer.close()
    learner, sampler, rng = sim.learner, sim.sampler, np.random.default_rng(0)
    counts = np.full(sim.config.batch, sim.config.n_bar)
    start = time.process_time()
    for _ in range(steps):
        index = sampler.next()
        p = learner.success_prob(index)
        y = sample_rollouts(rng, p, counts)
        g, _ = learner.gradient(y, counts, p, rng.standard_normal(y.size))
        d0, dK, u = learner.step_direction(index, counts, g, np.ones(index.size), sim.config.n_bar)
        learner.apply(d0, dK, index, u)
    world_ms = (time.process_time() - start) / steps * 1e3
    return {"step_ms": step_ms, "log_ms": log_ms, "world_ms": world_ms, "snapshot_s": save_s,
            "snapshot_mb": len(payload) / 1e6, "encode_s": encode_s}


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
    parser.add_argument("--full", action="store_true", help="also time the default curriculum study")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (1 min) at start")
    print("default world: 14,116 prompts, 32 groups, 256 prompts/step, n_bar = 4, 10 bins; CPU ms per step")
    print()
    header = f"{'method':<18} {'step':>7} {'log':>6} {'world':>6} {'1000 steps':>11} {'snapshot':>9} {'size':>7}"
    print(header)
    print("-" * len(header))
    total_cpu = 0.0
    for method in DEFAULT_METHODS:
        r = per_step(method, args.steps, warmup=60)
        per_run = (r["step_ms"] + r["log_ms"]) * 1000 / 1e3
        total_cpu += per_run
        print(f"{method:<18} {r['step_ms']:>6.2f} {r['log_ms']:>6.2f} {r['world_ms']:>6.2f} {per_run:>9.1f} s "
              f"{r['snapshot_s']:>7.2f} s {r['snapshot_mb']:>5.1f}MB")
    print()
    print(f"default curriculum ({len(DEFAULT_METHODS)} methods x 5 seeds x 1,000 steps): "
          f"~{5 * total_cpu:.0f} CPU s of steps + {len(DEFAULT_METHODS)} snapshots (seed 0 only) "
          f"-> ~{5 * total_cpu / 2:.0f} s on 2 idle cores before snapshots, read-back and figures")
    if args.full:
        r = full_study(args.workers)
        print(f"full default study (gdro simulate): exit {r['exit']}, wall {r['wall_s']:.1f} s "
              f"(runs {r['runs_wall_s']:.1f} s), CPU {r['cpu_s']:.1f} s, load average now "
              f"{os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
