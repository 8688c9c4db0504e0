"""Reward throughput: responses scored per second by MathReward's worker pool.

    python benchmarks/bench_reward.py [--workers 2] [--timeout 5] [--repeat 2]

Cases (MATH-500 from ../shared/data; every case scores 500 responses x --repeat):
- own answer, math-verify: each reference solution against its own answer, shortcuts off;
- own answer, shortcuts on: the same with the exact-string / integer shortcuts (the default);
- next row's answer: each solution against the next row's answer (math-verify says no, slowly);
- integer answers: "\\boxed{n}" against DAPO-style integer answers (shortcut path only);
- 1% pathological: own answers plus one power tower per 100 responses (each costs a timeout);
- pool round trip: the empty task through the pool (IPC overhead per response).
The first line gives the pool's start-up (forkserver + math-verify import and warm-up).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def _timed(reward, responses: list[str], answers: list[str], repeat: int) -> tuple[float, dict]:
    start = time.perf_counter()
    for _ in range(repeat):
        result = reward.score(responses, answers)
    metrics = dict(result.metrics, accepted=float(result.successes_R.mean()))
    return time.perf_counter() - start, metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    from real_runs.data import data_root, load_dataset_records
    from real_runs.reward import MathReward
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
    start = time.perf_counter()
    plain = MathReward(args.timeout, args.workers, exact_match_shortcut=False)
    plain.score(["\\boxed{1}"], ["\\frac{2}{2}"])
    rows.append(("pool start-up (s, not a rate)", 1, time.perf_counter() - start, {}))
    cases = [("own answer, math-verify", plain, solutions, answers)]
    default = MathReward(args.timeout, args.workers)
    cases += [("own answer, shortcuts on", default, solutions, answers),
              ("next row's answer", default, solutions, answers[1:] + answers[:1]),
              ("integer answers", default, guesses, integers),
              ("1% pathological", default, pathological, patho_answers)]
    for name, reward, responses, golds in cases:
        seconds, metrics = _timed(reward, responses, golds, args.repeat)
        rows.append((name, len(responses) * args.repeat, seconds, metrics))
    plain.close()
    default.close()
    with TimedPool("real_runs.rewards.pool:probe", args.workers, args.timeout) as pool:
        pool.map([("pid",)] * 10)
        start = time.perf_counter()
        pool.map([("pid",)] * 2000)
        rows.append(("pool round trip (empty task)", 2000, time.perf_counter() - start, {}))

    print(f"workers={args.workers} timeout={args.timeout}s cpus={os.cpu_count()} "
          f"load={os.getloadavg()[0]:.1f}")
    print("| case | responses | seconds | responses/s | accepted (last pass) | timeouts (last pass) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, count, seconds, metrics in rows:
        rate = f"{count / seconds:,.0f}" if count > 1 else "-"
        accepted = f"{100 * metrics['accepted']:.1f}%" if "accepted" in metrics else "-"
        print(f"| {name} | {count:,} | {seconds:.2f} | {rate} | {accepted} | "
              f"{metrics.get('reward/timeouts', 0):.0f} |")


if __name__ == "__main__":
    main()
