"""The smoke run's setup, shared by ``scripts/verl_smoke.sh`` (GPU) and the CPU ``fit`` test.

``python -m real_runs.verl.smoke prepare OUT [--tokenizer tiny|tiny-qwen]`` writes a random 2-layer
Qwen3, its tokenizer and toy parquet files; ``... verify OUT TOTAL_STEPS RESUMED_FROM`` checks a job
and its resumed continuation. What is written and why: docs/verl-notes.md#real_runs-verl-smoke.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

POOL, BATCH, N_BAR = 12, 6, 4
RESPONSE_TOKENS = 16


def toy_problems(count: int, split: str = "train") -> list:
    """``count`` arithmetic prompts with ids ``toy:<split>:<row>`` (the row fixes the known odds)."""
    from real_runs.types import Problem

    return [Problem(f"toy:{split}:{row}", f"What is {row % 7} + {row // 7 + 1}?", str(row % 7 + row // 7 + 1),
                    "toy", "toy") for row in range(count)]


def prepare(out: str | Path, tokenizer: str = "tiny", pool: int = POOL, seed: int = 0) -> Path:
    """Write the tiny model folder and the train / val parquets under ``out``; returns the model folder."""
    from real_runs.models import build_qwen3, qwen_tokenizer, tiny_tokenizer
    from real_runs.verl.convert import write_parquet

    out = Path(out)
    tok = tiny_tokenizer() if tokenizer == "tiny" else qwen_tokenizer()
    model_dir = out / "tiny_model"
    tok.save_pretrained(model_dir)
    model = build_qwen3(tok, seed=seed, hidden_size=128, num_attention_heads=2, num_key_value_heads=1, head_dim=64,
                        intermediate_size=256, max_position_embeddings=1024)
    model.generation_config.do_sample = True  # no greedy-only warning in verl's generation config check
    model.save_pretrained(model_dir)
    write_parquet(toy_problems(pool), out / "train.parquet")
    write_parquet(toy_problems(4, "val"), out / "val.parquet")
    return model_dir


def overrides(out: str | Path, steps: int, *, save_freq: int = 2, batch: int = BATCH, n_bar: int = N_BAR,
              test_freq: int = -1, ranks: int = 1) -> list[str]:
    """The smoke run's hydra overrides (tiny model, toy reward, recurring prompts, checkpoints)."""
    from real_runs.verl import reward

    out = Path(out)
    rows = batch * n_bar // ranks  # one micro-batch per rank
    return [
        f"data.train_files={out / 'train.parquet'}", f"data.val_files={out / 'val.parquet'}",
        f"data.train_batch_size={batch}", "data.max_prompt_length=128",
        f"data.max_response_length={RESPONSE_TOKENS}", "data.filter_overlong_prompts=true", "data.seed=1",
        f"actor_rollout_ref.model.path={out / 'tiny_model'}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={batch}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={rows}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={rows}",
        "actor_rollout_ref.actor.use_kl_loss=false", "actor_rollout_ref.actor.optim.lr=1e-4",
        f"actor_rollout_ref.rollout.n={n_bar}",
        f"actor_rollout_ref.rollout.tensor_model_parallel_size={ranks}",  # one rollout replica (1 GPU: TP 1)
        "actor_rollout_ref.rollout.val_kwargs.n=2", "actor_rollout_ref.rollout.val_kwargs.do_sample=true",
        "actor_rollout_ref.rollout.val_kwargs.temperature=1.0",
        "algorithm.use_kl_in_reward=false",
        f"reward.custom_reward_function.path={reward.__file__}",
        "reward.custom_reward_function.name=known_odds_score",
        "trainer.logger=[console]", "trainer.val_before_train=false", f"trainer.test_freq={test_freq}",
        f"trainer.save_freq={save_freq}", f"trainer.default_local_dir={out / 'ckpt'}", "trainer.resume_mode=auto",
        "trainer.project_name=gdro_smoke", "trainer.experiment_name=tiny", f"trainer.total_training_steps={steps}",
        "gdro.classifier_config.edges=[0.3,0.7]", "gdro.classifier_config.window=4",
        "gdro.allocator_config.n_max=8", "+gdro.allocator_config.eta=20.0",
        f"gdro.run_dir={out / 'run'}",
    ]


def verify(out: str | Path, total_steps: int, resumed_from: int, batch: int = BATCH, n_bar: int = N_BAR) -> dict:
    """Check a smoke run (a first job to ``resumed_from``, a second to ``total_steps``); raises
    AssertionError naming the first failed check. The checks: docs/verl-notes.md#real_runs-verl-smoke.
    """
    from gdro_lab.runformat.runlog import read_run
    from real_runs.verl.state import load_controller_state

    out = Path(out)
    run = read_run(out / "run")
    steps = run.steps.tolist()
    assert steps == list(range(1, total_steps + 1)), f"run directory steps {steps}, expected 1..{total_steps}"
    totals = run.scalars["total_rollouts"]
    assert np.all(totals == batch * n_bar), f"total rollouts per step {totals.tolist()}, expected {batch * n_bar}"
    ragged = [int(s) for s, row in zip(steps, run.bins["rollouts"])
              if np.isfinite(row).any() and np.nanmax(row) > np.nanmin(row)]
    assert ragged, "every step planned the same n for every bin: Rollout-GDRO never acted"
    multipliers = run.bins["multiplier"]
    scaled = [int(s) for s, row in zip(steps, multipliers) if np.any(np.abs(row[np.isfinite(row)] - 1.0) > 1e-3)]
    assert scaled, "every multiplier was 1: the advantages equal verl's unscaled ones"
    for name, expected in (("tracker_first.jsonl", range(1, resumed_from + 1)),
                           ("tracker_resumed.jsonl", range(resumed_from + 1, total_steps + 1))):
        records = {int(r["step"]): r["data"] for r in map(json.loads, (out / name).read_text().splitlines())}
        assert sorted(records) == list(expected), f"{name} has steps {sorted(records)}, expected {list(expected)}"
        for step, data in records.items():
            assert data.get("gdro/total_rollouts") == batch * n_bar and "rollout_alloc/mean_n" in data, \
                f"{name} step {step} lacks the gdro metrics"
    for step in (resumed_from, total_steps):
        saved, state = load_controller_state(out / "ckpt" / f"global_step_{step}")
        assert saved == step and set(state) == {"classifier", "weighter", "allocator"}
    return {"steps": steps, "ragged_steps": ragged, "scaled_steps": scaled,
            "mean_success": [round(float(v), 3) for v in run.scalars["mean_success"]]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m real_runs.verl.smoke", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare", help="write the tiny model and the toy parquets")
    prep.add_argument("out")
    prep.add_argument("--tokenizer", choices=("tiny", "tiny-qwen"), default="tiny")
    over = sub.add_parser("overrides", help="print the launch overrides, one per line")
    over.add_argument("out")
    over.add_argument("steps", type=int)
    over.add_argument("--ranks", type=int, default=1)
    check = sub.add_parser("verify", help="check a finished first + resumed run")
    check.add_argument("out")
    check.add_argument("steps", type=int)
    check.add_argument("resumed_from", type=int)
    args = parser.parse_args(argv)
    if args.command == "prepare":
        print(f"prepared {prepare(args.out, args.tokenizer)}")
    elif args.command == "overrides":
        print("\n".join(overrides(args.out, args.steps, ranks=args.ranks)))
    else:
        try:
            print(json.dumps(verify(args.out, args.steps, args.resumed_from)))
        except AssertionError as err:
            print(f"verify: FAILED: {err}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
