#!/usr/bin/env bash
# verl smoke run of the GDRO plugin on one GPU: 4 GRPO steps of a tiny random-weight model with
# Prompt-GDRO + Rollout-GDRO, a checkpoint at step 2, a resume from it, and checks of the budget,
# the controller files and the run directory. NOT RUN YET (no GPU in the sessions so far).
#
# Needs: one CUDA GPU, and a Python with verl 0.9.1 + vLLM (verl 0.9.1's fit rolls out only through
# vllm/sglang/trtllm servers) + this repository (`pip install --no-deps -e .`). No internet:
#   VERL_PY=/path/to/python   the interpreter to use (default: .venv-verl/bin/python)
#   .whl/verl/*.whl           optional offline wheels; when present, a venv .venv-verl-smoke is built
#                             with --system-site-packages (torch/transformers/vllm of the machine)
#                             and `pip install --no-index --find-links .whl/verl -r real_runs/verl/requirements-smoke.txt`
#   GDRO_DATA                 optional: real math500 prompts; synthetic arithmetic prompts otherwise
# Exit codes: 0 passed, 3 a prerequisite is missing (message says which), anything else failed.
# Output: $OUT (or a temp folder) holds the parquet, model, checkpoints, run dir and verl logs.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$(mktemp -d /tmp/verl_smoke.XXXXXX)}
mkdir -p "$OUT"
PY=${VERL_PY:-$ROOT/.venv-verl/bin/python}

if [ -d .whl/verl ] && [ -z "${VERL_PY:-}" ]; then
  python3 -m venv --system-site-packages .venv-verl-smoke
  .venv-verl-smoke/bin/pip install -q --no-index --find-links .whl/verl -r real_runs/verl/requirements-smoke.txt
  .venv-verl-smoke/bin/pip install -q --no-deps --no-build-isolation -e .
  PY=$ROOT/.venv-verl-smoke/bin/python
fi
if ! [ -x "$PY" ]; then echo "verl smoke: no interpreter at $PY: set VERL_PY or ship wheels under .whl/verl"; exit 3; fi
if ! "$PY" - <<'CHECK'
import importlib.util, sys
missing = [m for m in ("verl", "vllm", "torch", "transformers", "real_runs.verl") if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"verl smoke: missing module(s) {', '.join(missing)}: install verl 0.9.1 + vLLM, or ship them as wheels")
import torch
if not torch.cuda.is_available():
    sys.exit("verl smoke: no CUDA device: run it on the GPU machine")
CHECK
then exit 3; fi

export OMP_NUM_THREADS=4 TOKENIZERS_PARALLELISM=false HYDRA_FULL_ERROR=1 VERL_USE_EXTERNAL_PLUGINS=none
"$PY" - "$OUT" <<'PREP'
"""Tiny Qwen2 (random weights) + word-level tokenizer + train/val parquets, all local."""
import sys
from pathlib import Path

from transformers import Qwen2Config, Qwen2ForCausalLM

from real_runs.data import INSTRUCTION, data_root, load_dataset_records
from real_runs.types import Problem
from real_runs.verl.convert import word_level_tokenizer, write_parquet

out = Path(sys.argv[1])
if (data_root() / "math500" / "test.jsonl").exists():
    problems = load_dataset_records("math500", limit=80)
else:
    problems = [Problem(f"arith:train:{i}", f"What is {i % 9} + {i // 9} ?", str(i % 9 + i // 9), "arith", "arith")
                for i in range(80)]
write_parquet(problems[:64], out / "train.parquet")
write_parquet(problems[64:], out / "val.parquet")
words = " ".join(f"{p.problem} {INSTRUCTION} \\boxed{{{p.answer}}}" for p in problems).split()
model_dir = out / "tiny_model"
tok = word_level_tokenizer(words, model_dir)
vocab = tok.get_vocab()
config = Qwen2Config(vocab_size=len(vocab) + (-len(vocab)) % 64, hidden_size=128, intermediate_size=256,
                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                     max_position_embeddings=1024, eos_token_id=vocab["<eos>"], pad_token_id=vocab["<pad>"],
                     tie_word_embeddings=True)
Qwen2ForCausalLM(config).save_pretrained(model_dir)
print(f"prepared {len(problems)} prompts and a {sum(p.numel() for p in Qwen2ForCausalLM(config).parameters())}-parameter model in {out}")
PREP

REWARD=$("$PY" -c "import real_runs.verl.reward as m; print(m.__file__)")
run_steps() {
  "$PY" -m real_runs.verl.main \
    data.train_files="$OUT/train.parquet" data.val_files="$OUT/val.parquet" \
    data.train_batch_size=8 data.max_prompt_length=256 data.max_response_length=32 \
    data.filter_overlong_prompts=true data.dataloader_num_workers=0 \
    actor_rollout_ref.model.path="$OUT/tiny_model" \
    actor_rollout_ref.actor.ppo_mini_batch_size=8 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 \
    actor_rollout_ref.actor.use_kl_loss=false actor_rollout_ref.actor.optim.lr=1e-5 \
    actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.n=4 \
    actor_rollout_ref.rollout.gpu_memory_utilization=0.3 actor_rollout_ref.rollout.enforce_eager=true \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8 \
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8 \
    algorithm.use_kl_in_reward=false \
    reward.custom_reward_function.path="$REWARD" reward.custom_reward_function.name=compute_score \
    trainer.n_gpus_per_node=1 trainer.nnodes=1 trainer.logger='[console]' \
    trainer.val_before_train=false trainer.test_freq=-1 trainer.save_freq=2 \
    trainer.default_local_dir="$OUT/ckpt" trainer.resume_mode=auto \
    trainer.project_name=gdro_smoke trainer.experiment_name=tiny \
    trainer.total_training_steps="$1" \
    gdro.classifier_config.edges='[0.3,0.7]' gdro.classifier_config.window=4 \
    gdro.run_dir="$OUT/run" "${@:2}"
}
START=$(date +%s)
run_steps 3 > "$OUT/verl_first.log" 2>&1 || { tail -40 "$OUT/verl_first.log"; exit 1; }
FIRST=$(date +%s)
run_steps 4 > "$OUT/verl_resume.log" 2>&1 || { tail -40 "$OUT/verl_resume.log"; exit 1; }
END=$(date +%s)

"$PY" - "$OUT" <<'VERIFY'
import json, sys
from pathlib import Path
from gdro_lab.runlog import read_run
from real_runs.verl.state import load_controller_state

out = Path(sys.argv[1])
run = read_run(out / "run")
assert run.steps.tolist() == [1, 2, 3, 4], f"run dir steps {run.steps.tolist()} (step 3 of the first job must be replaced)"
assert set(run.scalars["total_rollouts"].tolist()) == {32.0}, "budget: 8 prompts x 4 rollouts every step"
for step in (2, 4):
    saved, state = load_controller_state(out / "ckpt" / f"global_step_{step}")
    assert saved == step and set(state) == {"classifier", "weighter", "allocator"}
log = (out / "verl_resume.log").read_text()
assert "rollout_alloc/mean_n" in log and "gdro/" in log, "gdro metrics missing from verl's console logger"
print(json.dumps({"steps": run.steps.tolist(), "mean_success": run.scalars["mean_success"].tolist()}))
VERIFY
echo "verl smoke: PASSED (first job 3 steps $((FIRST - START)) s, resumed job to step 4 $((END - FIRST)) s; output $OUT)"
