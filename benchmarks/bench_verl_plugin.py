"""Driver-side cost of the GDRO verl plugin per step, on real DataProto batches (verl venv only).

    OMP_NUM_THREADS=1 .venv-verl/bin/python benchmarks/bench_verl_plugin.py [--prompts 512] [--n 4] [--steps 30]

Times, per step: plan (classifier bins + allocator plan, ids read from extra_info), the planned
expansion of the prompt batch (sample_level_repeat), verl's own GRPO advantage on the expanded
batch (for scale), and observe (feedback from the reordered batch, three controller updates,
advantage scaling, step record). Prints a markdown table of medians and p90 in ms.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "real_runs" / "verl"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=512)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    import torch
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    from real_runs.verl import batch as vb
    from real_runs.verl.trainer import controller_from_config
    from verl_helpers import compose_config, prompt_batch, with_rewards

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = compose_config([f"actor_rollout_ref.rollout.n={args.n}", f"data.train_batch_size={args.prompts}",
                              f"gdro.run_dir={tmp}/run"])
        ctrl = controller_from_config(cfg)
        ctrl.open_run()
        pool = np.arange(4 * args.prompts)
        success = np.random.default_rng(0).beta(0.6, 0.6, size=pool.size)
        times: dict[str, list[float]] = {"plan": [], "expand": [], "verl grpo advantage": [], "observe": []}
        for step in range(1, args.steps + 1):
            rng = np.random.default_rng(step)
            rows = rng.choice(pool, size=args.prompts, replace=False)
            batch = prompt_batch([f"dapo:train:{k}" for k in rows], seed=step)
            t0 = time.perf_counter()
            counts = ctrl.plan(vb.prompt_ids(batch))
            t1 = time.perf_counter()
            expanded = vb.expand(batch, counts)
            t2 = time.perf_counter()
            scores = np.where(rng.random(len(expanded)) < success[rows[expanded.batch["prompt_row"].numpy()]], 1., -1.)
            with_rewards(expanded, scores, length=8)
            expanded = expanded.select_idxs(rng.permutation(len(expanded)))
            t3 = time.perf_counter()
            adv, _ = compute_grpo_outcome_advantage(expanded.batch["token_level_rewards"],
                                                    expanded.batch["response_mask"], expanded.non_tensor_batch["uid"])
            t4 = time.perf_counter()
            expanded.batch["advantages"] = adv
            t5 = time.perf_counter()
            ctrl.observe(expanded, step)
            t6 = time.perf_counter()
            for key, value in zip(times, (t1 - t0, t2 - t1, t4 - t3, t6 - t5)):
                times[key].append(1e3 * value)
        ctrl.close()
    print(f"| step part ({args.prompts} prompts x n_bar {args.n}, {args.steps} steps) | median ms | p90 ms |")
    print("|---|---:|---:|")
    for key, values in times.items():
        print(f"| {key} | {np.median(values):.2f} | {np.percentile(values, 90):.2f} |")


if __name__ == "__main__":
    main()
