"""Benchmark: ``hf`` engine generation throughput (tokens/s) with per-prompt sample counts.

Builds the tiny Qwen3 (``load_policy("tiny")``: 2 layers, hidden 64, 1,024-token BPE vocabulary,
random weights) or any model given with ``--model``, formats ``--prompts`` chat prompts of mixed
length, and times ``HFEngine.generate`` for a few shapes: all prompts with the same count, and a
ragged Rollout-GDRO-like plan (counts 2..12 with mean 4). Reports generated tokens per second
(wall clock, warm-up call excluded), the number of ``generate`` batches, and the share of rows
that stopped at EOS. The tiny model's random weights rarely emit EOS, so nearly every row runs
to ``max_new_tokens``: the figures are decode throughput at full length. Prints a table; asserts
nothing.

    python benchmarks/bench_engine.py [--model tiny] [--device cpu] [--threads 1] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from real_runs.engines.hf import HFEngine  # noqa: E402
from real_runs.models import load_policy  # noqa: E402
from real_runs.types import SamplingParams  # noqa: E402


def make_prompts(tokenizer, count: int, seed: int = 0) -> list[str]:
    """Chat prompts of 10..60 words of math-like text, deterministic."""
    rng = np.random.default_rng(seed)
    words = "find the value of x if 3 x + 5 = 20 and the sum of all primes below 100".split()
    out = []
    for _ in range(count):
        text = " ".join(rng.choice(words, size=int(rng.integers(10, 60))))
        out.append(tokenizer.apply_chat_template([{"role": "user", "content": text}],
                                                 tokenize=False, add_generation_prompt=True))
    return out


def ragged_counts(num_prompts: int, seed: int = 0) -> np.ndarray:
    """Counts in 2..12 summing exactly to 4 * num_prompts (a Rollout-GDRO-like plan)."""
    rng = np.random.default_rng(seed)
    counts = np.full(num_prompts, 4)
    for _ in range(num_prompts * 3):
        i, j = rng.integers(0, num_prompts, size=2)
        if counts[i] < 12 and counts[j] > 2:
            counts[i] += 1
            counts[j] -= 1
    return counts


def run(engine: HFEngine, prompts: list[str], counts_P: np.ndarray, max_new: int,
        repeats: int) -> dict:
    sampling = SamplingParams(max_new_tokens=max_new, seed=0)
    engine.generate(prompts[:2], np.ones(2, int), SamplingParams(max_new_tokens=4, seed=0))
    rates, last = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        last = engine.generate(prompts, counts_P, sampling)
        rates.append(last.lengths_R.sum() / (time.perf_counter() - start))
    stops = np.mean([r == "stop" for r in last.finish_reasons])
    return {"rows": int(counts_P.sum()), "tokens": int(last.lengths_R.sum()),
            "batches": int(last.metrics["engine/batches"]), "stop": float(stops),
            "median": statistics.median(rates), "best": max(rates)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=16)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, tok = load_policy(args.model, device=args.device)
    prompts = make_prompts(tok, args.prompts)
    uniform = np.full(args.prompts, 4)
    shapes = [  # (label, counts, max_new_tokens, max_batch_tokens)
        ("uniform n=4", uniform, 128, 65536),
        ("ragged 2..12, mean 4", ragged_counts(args.prompts), 128, 65536),
        ("ragged, 4k-token batches", ragged_counts(args.prompts), 128, 4096),
        ("uniform n=4, 512 new", uniform, 512, 65536),
    ]
    print(f"model={args.model} device={args.device} dtype={model.dtype} threads={args.threads} "
          f"torch={torch.__version__} prompts={args.prompts}")
    print("| shape | rows | max new | batches | tokens | stop share | tokens/s (median) | best |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, counts, max_new, budget in shapes:
        engine = HFEngine(model, tok, max_batch_tokens=budget)
        r = run(engine, prompts, counts, max_new, args.repeats)
        print(f"| {label} | {r['rows']} | {max_new} | {r['batches']} | {r['tokens']} | "
              f"{r['stop']:.2f} | {r['median']:.0f} | {r['best']:.0f} |")


if __name__ == "__main__":
    main()
