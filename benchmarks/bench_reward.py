"""Reward throughput: responses scored per second by MathReward on realistic batches.

    OMP_NUM_THREADS=1 python benchmarks/bench_reward.py --ref 1b2c5da [--prompts 256] [--workers N] [--repeat 2]
    python benchmarks/bench_reward.py --legacy      # also the MATH-500 cases of earlier tables

The realistic batch (``real_runs.rewards.realistic``, seeded): ``--prompts`` MATH-500 answers,
4-12 responses each, answers repeating as a policy's do, varied formatting and popular mistakes
(about 2,000 responses for 256 prompts, one training step). Each tree scores, with one MathReward:
- first: a batch right after the pool started (seed + 1000), as a run's first step;
- cold (the headline): ``--repeat`` new batches (seeds seed, seed + 1, ...), each never scored before by
  this MathReward, as a run's later steps: its workers are warm but the batch's answers are new (only
  what recurs across batches, as a real run's prompts recur across epochs, is in the verdict cache);
- warm: the last cold batch again (every verdict cached: the next epoch of the same prompts).
An older tree has no cache, so its warm row does the work of its cold rows. The first line gives the
pool's start-up (forkserver + math-verify import and warm-up). ``--ref COMMIT`` times that commit's
tree (``git archive``) in the same run: each tree scores in its own process, the two alternating
batch by batch with the same number of workers (default: the usable cores), and the table says
whether their verdicts are identical. ``--legacy`` adds the earlier cases on this tree: each
MATH-500 reference solution against its own answer (math-verify only, and with shortcuts), against
the next row's answer, integer answers, 1% pathological power towers, and the pool's round trip per task.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def realistic(prompts: int, seed: int) -> dict[str, list[str]]:
    """The realistic batch, built by this tree's generator (the same strings for every tree timed)."""
    sys.path.insert(0, str(ROOT))
    try:
        from real_runs.data import load_dataset_records
        from real_runs.rewards.realistic import realistic_batch
    finally:
        sys.path.pop(0)
    batch = realistic_batch([p.answer for p in load_dataset_records("math500")], prompts, seed)
    return {"responses": batch.responses, "answers": batch.answers}


def worker(args: argparse.Namespace) -> None:
    """Read the batches (stdin's first line), then score the batch named on each further line; JSON answers."""
    try:
        from real_runs.rewards.math import MathReward
    except ImportError:  # a --ref tree from before the rewards package: its MathReward is in the module real_runs.reward
        from real_runs.reward import MathReward  # type: ignore[no-redef]

    batches = json.loads(sys.stdin.readline())
    start = time.perf_counter()
    reward = MathReward(args.timeout, args.workers)
    reward.score(["\\boxed{1}"], ["\\frac{2}{2}"])
    print(json.dumps({"startup": time.perf_counter() - start}), flush=True)
    for line in sys.stdin:
        batch = batches[line.strip()]
        start = time.perf_counter()
        result = reward.score(batch["responses"], batch["answers"])
        seconds = time.perf_counter() - start
        print(json.dumps({"seconds": seconds, "successes": result.successes_R.astype(int).tolist(),
                          "metrics": result.metrics}), flush=True)
    reward.close()


class Tree:
    def __init__(self, label: str, path: Path, args: argparse.Namespace, batches: dict):
        self.label = label
        env = dict(os.environ, PYTHONPATH=str(path))
        command = [sys.executable, __file__, "--worker", "--timeout", str(args.timeout), "--workers", str(args.workers)]
        self.process = subprocess.Popen(command, env=env, cwd=path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True)
        self._send(json.dumps(batches))
        self.startup = self._read()["startup"]
        self.rows: dict[str, list[dict]] = {"first": [], "cold": [], "warm": []}

    def _send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def _read(self) -> dict:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"bench_reward: the {self.label} worker stopped (see its error above)")
        return json.loads(line)

    def run(self, row: str, batch: str) -> None:
        self._send(batch)
        self.rows[row].append(dict(self._read(), batch=batch))

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def checkout(commit: str, into: Path) -> Path:
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit],
                                 check=True, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        detail = getattr(err, "stderr", b"") or b""
        raise SystemExit(f"bench_reward: cannot git archive {commit!r} ({detail.decode().strip() or err}): "
                         "pass a commit of this repository") from None
    (into / "ref.tar").write_bytes(archive)
    with tarfile.open(into / "ref.tar") as tar:
        tar.extractall(into / "tree", filter="data")
    return into / "tree"


def legacy_cases(args: argparse.Namespace) -> list[tuple[str, int, float, dict]]:
    """The earlier table's MATH-500 cases, on this tree."""
    from real_runs.data import data_root, load_dataset_records
    from real_runs.rewards.math import MathReward
    from real_runs.rewards.pool import TimedPool

    problems = load_dataset_records("math500")
    with open(data_root() / "math500" / "test.jsonl", encoding="utf-8") as handle:
        solutions = [json.loads(line)["solution"] for line in handle]
    answers = [p.answer for p in problems]
    rng = np.random.default_rng(0)
    integers = [str(v) for v in rng.integers(0, 1000, size=500)]
    guesses = [f"so \\boxed{{{v if i % 2 else int(v) + 1}}}" for i, v in enumerate(integers)]
    pathological = [r if i % 100 else "\\boxed{9^{9^{9^{9^{9}}}}}" for i, r in enumerate(solutions)]
    patho_answers = [a if i % 100 else "5" for i, a in enumerate(answers)]
    rows = []
    plain = MathReward(args.timeout, args.workers, exact_match_shortcut=False, cache_size=0)
    default = MathReward(args.timeout, args.workers, cache_size=0)
    cases = [("own answer, math-verify (no cache)", plain, solutions, answers),
             ("own answer, shortcuts on (no cache)", default, solutions, answers),
             ("next row's answer (no cache)", default, solutions, answers[1:] + answers[:1]),
             ("integer answers", default, guesses, integers),
             ("1% pathological (no cache)", default, pathological, patho_answers)]
    for name, reward, responses, golds in cases:
        start = time.perf_counter()
        for _ in range(args.repeat):
            result = reward.score(responses, golds)
        metrics = dict(result.metrics, accepted=float(result.successes_R.mean()))
        rows.append((name, len(responses) * args.repeat, time.perf_counter() - start, metrics))
    plain.close()
    default.close()
    with TimedPool("real_runs.rewards.pool:probe", args.workers, args.timeout) as pool:
        pool.map([("pid",)] * 10)
        start = time.perf_counter()
        pool.map([("pid",)] * 2000)
        rows.append(("pool round trip (empty task)", 2000, time.perf_counter() - start, {}))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=256, help="prompts in the realistic batch (4-12 responses each)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)),
                        help="reward worker processes (default: the usable cores)")
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=2, help="cold batches per tree (new batches, seeds seed..)")
    parser.add_argument("--ref", default=None, help="also time this commit's tree (git archive)")
    parser.add_argument("--legacy", action="store_true", help="also time the earlier MATH-500 cases")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    names = ["first"] + [f"cold{i}" for i in range(args.repeat)]
    seeds = [args.seed + 1000] + [args.seed + i for i in range(args.repeat)]
    batches = {name: realistic(args.prompts, seed) for name, seed in zip(names, seeds)}
    sizes = sorted({len(batch["responses"]) for batch in batches.values()})
    print(f"workers={args.workers} timeout={args.timeout}s cpus={os.cpu_count()} load={os.getloadavg()[0]:.1f}; "
          f"realistic batches: {args.prompts} prompts, {sizes[0]:,}-{sizes[-1]:,} responses, first seed "
          f"{args.seed + 1000}, cold seeds {args.seed}..{args.seed + args.repeat - 1}")
    plan = [("first", "first")] + [("cold", name) for name in names[1:]] + [("warm", names[-1])]
    with tempfile.TemporaryDirectory(prefix="bench-reward-") as tmp:
        paths = [("this tree", ROOT)] + ([(args.ref, checkout(args.ref, Path(tmp)))] if args.ref else [])
        trees = []
        for label, path in paths[::-1]:  # start the pools one at a time
            trees.append(Tree(label, path, args, batches))
        trees = trees[::-1]
        for row, name in plan:
            for tree in trees[::-1]:  # the reference first, then this tree, same conditions
                tree.run(row, name)
        for tree in trees:
            tree.close()
    print("| tree | pass | responses/s (median of batches) | seconds | math-verify calls | cached | numeric "
          "| shortcut | no answer | accepted |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    rates = {}
    for tree in trees[::-1]:
        print(f"| {tree.label} | pool start-up | - | {tree.startup:.2f} | | | | | | |")
        for row, runs in tree.rows.items():
            per_batch = [len(batches[run["batch"]]["responses"]) / run["seconds"] for run in runs]
            rate = float(np.median(per_batch))
            rates[tree.label, row] = rate
            m = runs[-1]["metrics"]
            count = len(batches[runs[-1]["batch"]]["responses"])
            calls = m.get("reward/verified", count - m.get("reward/shortcut", 0) - m.get("reward/no_answer", 0))
            accepted = 100 * float(np.mean(runs[-1]["successes"]))
            print(f"| {tree.label} | {row}{f' ({len(runs)} batches)' if len(runs) > 1 else ''} | {rate:,.0f} "
                  f"| {float(np.median([run['seconds'] for run in runs])):.2f} | {calls:.0f} "
                  f"| {m.get('reward/cached', 0):.0f} | {m.get('reward/numeric', 0):.0f} "
                  f"| {m.get('reward/shortcut', 0):.0f} | {m.get('reward/no_answer', 0):.0f} | {accepted:.1f}% |")
    if args.ref:
        same = all(run["successes"] == other["successes"]
                   for row, runs in trees[0].rows.items() for run, other in zip(runs, trees[-1].rows[row]))
        for row in ("first", "cold", "warm"):
            print(f"speed-up {row}: {rates['this tree', row] / rates[args.ref, row]:.1f}x")
        print(f"verdicts identical to {args.ref}: {'yes' if same else 'NO'}")
    if args.legacy:
        print("\n| case (this tree) | responses | seconds | responses/s | accepted (last pass) | timeouts (last pass) |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, count, seconds, metrics in legacy_cases(args):
            shown = f"{100 * metrics['accepted']:.1f}%" if "accepted" in metrics else "-"
            print(f"| {name} | {count:,} | {seconds:.2f} | {count / seconds:,.0f} | {shown} | "
                  f"{metrics.get('reward/timeouts', 0):.0f} |")


if __name__ == "__main__":
    main()
