"""Per-step cost of each controller at the paper's scale (a benchmark, not a test).

256 prompts per step drawn from 14,116 stable ids, 10 bins, arms 2..12, n_bar = 4
(1,024 rollouts per step). Times the driver-side work of one step per controller:
classifier bins() + update(); Prompt-GDRO update() + multipliers(); Rollout-GDRO plan() + update(),
with the planner (plan()) also timed on its own, under full and bandit feedback (the exact planner's
work depends on how far the arm distributions are from log-concave: bandit makes them spiky).
The paper reports 0.355 s (Prompt-GDRO) and 0.446 s (Rollout-GDRO) per step against 0.043 s
for plain GRPO (driver-side advantage stage, Qwen3-4B). Run pinned to one core:

    taskset -c 0 python benchmarks/bench_controllers.py [--feedback full bandit] [--planner exact]
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from gdro_lab.feedback import StepFeedback
from gdro_lab.grpo import grpo_advantages
from gdro_lab.registry import build


def run(steps: int, warmup: int, prompts: int, batch: int, seed: int, feedback_mode: str = "full",
        planner: str = "exact", clock: str = "wall") -> dict[str, np.ndarray]:
    """Per-step milliseconds per controller; ``clock='cpu'`` times process CPU (robust on a shared machine)."""
    now = time.perf_counter if clock == "wall" else time.process_time
    rng = np.random.default_rng(seed)
    ids = [f"dapo:train:{i}" for i in range(prompts)]
    success = rng.beta(0.5, 0.5, size=prompts)
    classifier = build("classifier", "window", {}, seed=seed)
    weighter = build("weighter", "gdro", {"num_bins": 10}, seed=seed)
    allocator = build("allocator", "gdro", {"num_bins": 10, "feedback": feedback_mode, "planner": planner}, seed=seed)
    times: dict[str, list[float]] = {"classifier": [], "prompt_gdro": [], "rollout_gdro": [],
                                     "rollout_gdro plan()": [], "grpo_advantages": []}
    for step in range(warmup + steps):
        index = rng.choice(prompts, size=batch, replace=False)
        batch_ids = [ids[i] for i in index]
        t0 = now()
        bins = classifier.bins(batch_ids)
        t1 = now()
        plan = allocator.plan(bins, batch_ids)
        t2 = now()
        outcome = rng.random(int(plan.sum())) < np.repeat(success[index], plan)
        feedback = StepFeedback(batch_ids, bins, plan, 2.0 * outcome - 1.0, outcome)
        t3 = now()
        grpo_advantages(feedback.rewards_R, feedback.counts_P)
        t4 = now()
        classifier.update(feedback)
        t5 = now()
        weighter.update(feedback)
        weighter.multipliers(bins)
        t6 = now()
        allocator.update(feedback)
        t7 = now()
        if step >= warmup:
            times["classifier"].append((t1 - t0) + (t5 - t4))
            times["rollout_gdro"].append((t2 - t1) + (t7 - t6))
            times["rollout_gdro plan()"].append(t2 - t1)
            times["prompt_gdro"].append(t6 - t5)
            times["grpo_advantages"].append(t4 - t3)
    return {name: np.array(values) * 1e3 for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=100, help="steps before timing (all ids seen)")
    parser.add_argument("--prompts", type=int, default=14116)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--feedback", nargs="+", default=["full", "bandit"], choices=["full", "bandit"])
    parser.add_argument("--planner", default="exact", choices=["exact", "dp_count", "dp_bin"])
    parser.add_argument("--clock", default="wall", choices=["wall", "cpu"],
                        help="wall time, or process CPU time (less sensitive to other jobs on the machine)")
    args = parser.parse_args()
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.processor() or platform.machine()}")
    print(f"{args.steps} timed steps, batch {args.batch}, {args.prompts} prompt ids, 10 bins, arms 2..12, "
          f"planner {args.planner}, {args.clock} clock\n")
    print("| feedback | controller (per step) | median ms | p90 ms | max ms |")
    print("|---|---|---|---|---|")
    for mode in args.feedback:
        times = run(args.steps, args.warmup, args.prompts, args.batch, args.seed, mode, args.planner, args.clock)
        for name, values in times.items():
            print(f"| {mode} | {name} | {np.median(values):.3f} | {np.percentile(values, 90):.3f} "
                  f"| {values.max():.3f} |")
        total = sum(times[n] for n in ("classifier", "prompt_gdro", "rollout_gdro"))
        print(f"| {mode} | all three controllers | {np.median(total):.3f} | {np.percentile(total, 90):.3f} "
              f"| {total.max():.3f} |")


if __name__ == "__main__":
    main()
