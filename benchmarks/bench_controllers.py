"""Per-step cost of the whole controller step at the paper's scale (a benchmark, not a test).

256 prompts per step drawn from 14,116 stable ids, 10 bins, arms 2..12, n_bar = 4 (1,024
rollouts per step). One step is what the trainer and the verl plugin run per step, each part
timed on its own:

- classifier: bins() before the plan + update();
- rollout_gdro: plan() + update() (plan() also shown alone);
- feedback: building the step's StepFeedback (its checks and shared statistics);
- prompt_gdro: update() + multipliers();
- grpo_advantages: the step's GRPO advantages (clip 5);
- step_record: the logged record (weights, multipliers, signal, score, sigma, mu, as the verl plugin logs);
- whole step: the sum of all of them; "three controllers" is the first three as earlier tables had it.

Under full and bandit feedback (the exact planner's work depends on how far the arm
distributions are from log-concave: bandit makes them spiky). The paper reports 0.355 s
(Prompt-GDRO) and 0.446 s (Rollout-GDRO) per step against 0.043 s for plain GRPO (driver-side
advantage stage, Qwen3-4B).

``--ref COMMIT`` also times the tree of an earlier commit (``git archive`` into a temporary
folder) in the same run: each tree runs in its own worker process and the two alternate in
blocks of ``--block`` steps, so both see the same machine load. The worker code is this file;
it drives an older tree through the API it has (string ids when there is no PromptIndex).
Pinned to one core, as the README's figures are measured:

    taskset -c 0 python benchmarks/bench_controllers.py --ref 1b2c5da
    taskset -c 0 python benchmarks/bench_controllers.py [--feedback full bandit] [--planner exact] [--clock cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

PARTS = ("classifier", "rollout_gdro", "rollout_gdro plan()", "feedback", "prompt_gdro", "grpo_advantages",
         "step_record")
ROOT = Path(__file__).resolve().parents[1]


def make_step(prompts: int, batch: int, seed: int, feedback_mode: str, planner: str, clock: str):
    """A closure running one timed step of the tree on sys.path; returns {part: seconds}."""
    import gdro_lab
    from gdro_lab.controllers.feedback import StepFeedback
    from gdro_lab.controllers.registry import build
    from gdro_lab.controllers.signals import SIGNALS
    from gdro_lab.runformat.record import step_record

    # a file of the tree itself: an editable install's finder would find main's gdro_lab.controllers.prompts
    interned = (Path(gdro_lab.__file__).parent / "prompts.py").exists()
    now = time.perf_counter if clock == "wall" else time.process_time
    rng = np.random.default_rng(seed)
    names = [f"dapo:train:{i}" for i in range(prompts)]
    success = rng.beta(0.5, 0.5, size=prompts)
    index = None
    if interned:  # the run interns its ids once, at data loading
        from gdro_lab.controllers.prompts import PromptIndex
        index = PromptIndex(names)
    classifier = build("classifier", "window", {}, seed, **({"prompts": index} if interned else {}))
    weighter = build("weighter", "gdro", {"num_bins": 10}, seed)
    allocator = build("allocator", "gdro", {"num_bins": 10, "feedback": feedback_mode, "planner": planner}, seed)
    signal = SIGNALS[weighter.config.signal]
    if not interned:
        from gdro_lab.functional.grpo import grpo_advantages

    def step() -> dict[str, float]:
        chosen = rng.choice(prompts, size=batch, replace=False)
        ids = chosen if interned else [names[i] for i in chosen]
        t0 = now()
        bins = classifier.bins(ids)
        t1 = now()
        plan = allocator.plan(bins, ids)
        t2 = now()
        outcome = rng.random(int(plan.sum())) < np.repeat(success[chosen], plan)
        rewards = 2.0 * outcome - 1.0
        t3 = now()
        if interned:
            feedback = StepFeedback(ids, bins, plan, rewards, outcome, prompts=index)
        else:
            feedback = StepFeedback(ids, bins, plan, rewards, outcome)
        t4 = now()
        classifier.update(feedback)
        t5 = now()
        weighter.update(feedback)
        multipliers = weighter.multipliers(bins)
        t6 = now()
        allocator.update(feedback)
        t7 = now()
        if interned:
            feedback.advantages(clip=5.0)
        else:
            grpo_advantages(rewards, plan, clip=5.0)
        t8 = now()
        step_record(feedback, 10, n_bar=4, n_min=2, n_max=12, weights_G=weighter.bin_weights(),
                    multipliers_P=multipliers, signal_P=signal(feedback), score_G=weighter.score_G,
                    sigma_G=np.sqrt(allocator.variance_G), mu=allocator.mu)
        t9 = now()
        return {"classifier": (t1 - t0) + (t5 - t4), "rollout_gdro": (t2 - t1) + (t7 - t6),
                "rollout_gdro plan()": t2 - t1, "feedback": t4 - t3, "prompt_gdro": t6 - t5,
                "grpo_advantages": t8 - t7, "step_record": t9 - t8}

    return step


def worker(args: argparse.Namespace) -> None:
    """Read a step count per line from stdin, answer each with one JSON line of per-step times (ms)."""
    step = make_step(args.prompts, args.batch, args.seed, args.feedback[0], args.planner, args.clock)
    for line in sys.stdin:
        rows = [step() for _ in range(int(line))]
        print(json.dumps({part: [1e3 * row[part] for row in rows] for part in PARTS}), flush=True)


class Tree:
    """A worker process timing one source tree (``path`` first on PYTHONPATH)."""

    def __init__(self, label: str, path: Path, args: argparse.Namespace, mode: str):
        self.label = label
        command = [sys.executable, __file__, "--worker", "--feedback", mode, "--planner", args.planner,
                   "--clock", args.clock, "--prompts", str(args.prompts), "--batch", str(args.batch),
                   "--seed", str(args.seed)]
        env = dict(os.environ, PYTHONPATH=str(path))
        self.process = subprocess.Popen(command, env=env, cwd=path, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        self.times: dict[str, list[float]] = {part: [] for part in PARTS}

    def run(self, steps: int, keep: bool = True) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{steps}\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"bench_controllers: the {self.label} worker stopped (see its error above)")
        if keep:
            for part, values in json.loads(line).items():
                self.times[part].extend(values)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def checkout(commit: str, into: Path) -> Path:
    """``git archive commit`` of this repository, unpacked into ``into``."""
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit],
                                 check=True, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        detail = getattr(err, "stderr", b"") or b""
        raise SystemExit(f"bench_controllers: cannot git archive {commit!r} ({detail.decode().strip() or err}): "
                         "pass a commit of this repository") from None
    tar_path = into / "ref.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into / "tree", filter="data")
    return into / "tree"


def summary(times: dict[str, list[float]]) -> dict[str, np.ndarray]:
    out = {part: np.asarray(values) for part, values in times.items()}
    out["three controllers"] = out["classifier"] + out["prompt_gdro"] + out["rollout_gdro"]
    out["whole step"] = np.sum([out[part] for part in PARTS if part != "rollout_gdro plan()"], axis=0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help="timed steps per feedback mode and tree")
    parser.add_argument("--warmup", type=int, default=100, help="steps before timing (most ids seen by then)")
    parser.add_argument("--block", type=int, default=50, help="steps per turn when two trees alternate")
    parser.add_argument("--prompts", type=int, default=14116)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--feedback", nargs="+", default=["full", "bandit"], choices=["full", "bandit"])
    parser.add_argument("--planner", default="exact", choices=["exact", "dp_count", "dp_bin"])
    parser.add_argument("--clock", default="wall", choices=["wall", "cpu"],
                        help="wall time, or process CPU time (less sensitive to other jobs on the machine)")
    parser.add_argument("--ref", default=None, help="also time this commit's tree (git archive), interleaved")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.processor() or platform.machine()}, "
          f"cpus allowed {len(os.sched_getaffinity(0))}, load {os.getloadavg()[0]:.1f}")
    print(f"{args.steps} timed steps per tree and mode after {args.warmup} warm-up, batch {args.batch}, "
          f"{args.prompts} prompt ids, 10 bins, arms 2..12, planner {args.planner}, {args.clock} clock"
          + (f", interleaved with {args.ref} in blocks of {args.block}" if args.ref else "") + "\n")
    with tempfile.TemporaryDirectory(prefix="bench-controllers-") as tmp:
        trees = [("this tree", ROOT)]
        if args.ref:
            trees.insert(0, (args.ref, checkout(args.ref, Path(tmp))))
        if args.ref:
            print(f"| feedback | part (per step) | {args.ref} median ms | this tree median ms | speed-up "
                  f"| this tree p90 ms |")
            print("|---|---|---:|---:|---:|---:|")
        else:
            print("| feedback | part (per step) | median ms | p90 ms | max ms |")
            print("|---|---|---:|---:|---:|")
        for mode in args.feedback:
            workers = [Tree(label, path, args, mode) for label, path in trees]
            for tree in workers:
                tree.run(args.warmup, keep=False)
            done = 0
            while done < args.steps:
                block = min(args.block, args.steps - done)
                for tree in (workers if (done // args.block) % 2 == 0 else workers[::-1]):
                    tree.run(block)
                done += block
            for tree in workers:
                tree.close()
            results = [summary(tree.times) for tree in workers]
            for part in results[-1]:
                new = results[-1][part]
                if args.ref:
                    old = results[0][part]
                    print(f"| {mode} | {part} | {np.median(old):.3f} | {np.median(new):.3f} "
                          f"| {np.median(old) / np.median(new):.1f}x | {np.percentile(new, 90):.3f} |")
                else:
                    print(f"| {mode} | {part} | {np.median(new):.3f} | {np.percentile(new, 90):.3f} "
                          f"| {new.max():.3f} |")


if __name__ == "__main__":
    main()
