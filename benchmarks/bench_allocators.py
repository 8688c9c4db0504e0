"""Per-step cost of the arena's controllers at the paper's scale (a benchmark, not a test).

256 prompts per step drawn from 14,116 stable ids, 10 bins, arms 2..12, n_bar = 4 (1,024 rollouts
per step), after a warm-up that has shown every id at least once (the per-prompt histories are
full size). Times plan() + update() of each allocator (knapsack, vip, gdro_prompt; gdro and
uniform for reference) and screen() + accept() + update() of each selector (greso,
dynamic_sampling), with the bins from a real classifier (its own time is not counted: it is
shared by every method, see bench_controllers.py). The prompts are int indices of one shared
PromptIndex, as every loop passes them (``--string-ids`` times the string-id path instead).
Target (issue 22): at most 1 ms per step.

    taskset -c 0 python benchmarks/bench_allocators.py [--steps 300] [--clock cpu] [--string-ids]
"""

from __future__ import annotations

import argparse
import platform
import time
from typing import Any

import numpy as np

from gdro_lab.controllers.feedback import StepFeedback
from gdro_lab.controllers.prompts import PromptIndex
from gdro_lab.controllers.registry import build

ALLOCATORS = ("uniform", "gdro", "gdro_prompt", "knapsack", "vip")
SELECTORS = ("dynamic_sampling", "greso")


def run(steps: int, warmup: int, prompts: int, batch: int, seed: int, clock: str = "wall",
        string_ids: bool = False) -> dict[str, dict[str, np.ndarray]]:
    """Per-step milliseconds per controller and phase."""
    now = time.perf_counter if clock == "wall" else time.process_time
    rng = np.random.default_rng(seed)
    names = [f"dapo:train:{i}" for i in range(prompts)]
    index = None if string_ids else PromptIndex(names)
    ids: Any = names if string_ids else np.arange(prompts)
    success = rng.beta(0.5, 0.5, size=prompts)
    classifier = build("classifier", "window", {}, seed=seed, prompts=index)
    allocators = {n: build("allocator", n, {"num_bins": 10}, seed=seed, prompts=index) for n in ALLOCATORS}
    selectors = {n: build("selector", n, {}, seed=seed, prompts=index) for n in SELECTORS}
    times: dict[str, dict[str, list[float]]] = {n: {"plan": [], "update": []} for n in ALLOCATORS}
    times.update({n: {"screen": [], "accept": [], "update": []} for n in SELECTORS})
    order = rng.permutation(prompts)
    for step in range(warmup + steps):
        start = (step * batch) % (prompts - batch)
        rows = order[start:start + batch] if step * batch < prompts else rng.choice(prompts, batch, replace=False)
        batch_ids = [ids[i] for i in rows] if string_ids else ids[rows]
        bins = classifier.bins(batch_ids)
        outcome = rng.random(batch * 12) < np.repeat(success[rows], 12)
        for name, allocator in allocators.items():
            t0 = now()
            plan = allocator.plan(bins, batch_ids)
            t1 = now()
            y = outcome[: int(plan.sum())]
            feedback = StepFeedback(batch_ids, bins, plan, 2.0 * y - 1.0, y, prompts=index)
            t2 = now()
            allocator.update(feedback)
            t3 = now()
            if step >= warmup:
                times[name]["plan"].append(t1 - t0)
                times[name]["update"].append(t3 - t2)
        uniform = np.full(batch, 4)
        y = outcome[: 4 * batch]
        feedback = StepFeedback(batch_ids, bins, uniform, 2.0 * y - 1.0, y, prompts=index)
        for name, selector in selectors.items():
            t0 = now()
            selector.screen(batch_ids)
            t1 = now()
            selector.accept(feedback)
            t2 = now()
            selector.update(feedback)
            t3 = now()
            if step >= warmup:
                times[name]["screen"].append(t1 - t0)
                times[name]["accept"].append(t2 - t1)
                times[name]["update"].append(t3 - t2)
        classifier.update(feedback)
    return {n: {phase: np.array(v) * 1e3 for phase, v in phases.items()} for n, phases in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=60, help="steps before timing (56 show every id once)")
    parser.add_argument("--prompts", type=int, default=14116)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--string-ids", action="store_true", help="pass string ids instead of PromptIndex indices")
    parser.add_argument("--clock", default="wall", choices=["wall", "cpu"],
                        help="wall time, or process CPU time (less sensitive to other jobs on the machine)")
    args = parser.parse_args()
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.processor() or platform.machine()}, "
          f"clock {args.clock}, {args.batch} prompts/step from {args.prompts:,} ids, {args.steps} timed steps, "
          f"{'string ids' if args.string_ids else 'PromptIndex indices'}")
    result = run(args.steps, args.warmup, args.prompts, args.batch, args.seed, args.clock, args.string_ids)
    print("| controller | phases | median ms | p90 ms | per phase (median ms) |")
    print("|---|---|---|---|---|")
    for name, phases in result.items():
        total = sum(phases.values())
        parts = ", ".join(f"{p} {np.median(v):.3f}" for p, v in phases.items())
        print(f"| {name} | {' + '.join(phases)} | {np.median(total):.3f} | {np.percentile(total, 90):.3f} | {parts} |")


if __name__ == "__main__":
    main()
