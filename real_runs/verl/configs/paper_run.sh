#!/usr/bin/env bash
# The paper's runs on verl 0.9.1 (arXiv 2601.19280): one base for every launch script in this folder.
#   bash real_runs/verl/configs/paper_run.sh METHOD [hydra overrides...]      METHOD: prompt_gdro | rollout_gdro
# Use the wrappers: paper_prompt_gdro.sh, paper_rollout_gdro.sh (one published run each per MODEL_SIZE),
# single_gpu.sh, multi_node.sh. Every setting, its value and its source (paper App. A, the released
# scripts, or our departure with its reason) is the table in real_runs/verl/paper_settings.py, which
# tests/real_runs/verl/test_launch_scripts.py checks against the command this script composes; docs/launch.md.
#
# Knobs (environment):
#   MODEL_SIZE     1.7b (default) | 4b | 8b: Qwen/Qwen3-<size>-Base (MODEL overrides the id or a local folder)
#   VERL_DATA      folder with the converted parquets: dapo_train.parquet (train) and one per benchmark,
#                  aime24 aime25 amc23 math500 minerva olympiadbench gpqa (.parquet); see docs/install.md
#   NNODES, GPUS_PER_NODE   default 1 and 8 (several nodes: start Ray first, docs/launch.md)
#   BINS           10 (default, the paper) | 6 | 3: the released scripts' "6-bin" (6 edges: 7 bins) and 3-bin
#                  classifiers (3 bins add the exclude_extremes class: 4 classes)
#   PROMPT_SCHEDULE  paper (default: batch 256, 1000 steps) | released (Prompt-GDRO's script: 512, 500)
#   CKPT, RUN_DIR  verl's checkpoint folder and our run directory (default under $HOME)
#   LOGGER         verl's trackers, default [console,wandb] (wandb must import; e.g. LOGGER=[console,file])
#   PYTHON         the interpreter with verl (default: python)
#   GDRO_PRINT_CMD=1  print the launch command, one argument per line, and exit (nothing runs, no file checked)
# Checkpoints: one at every validation (save_freq = test_freq), all kept, so the paper's "peak checkpoint"
# (the best validated step) can be recovered; override trainer.save_freq with trainer.test_freq.
# Exit codes: 0 done, 2 a bad knob or a missing prerequisite (one line says which), else verl's own.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
PY=${PYTHON:-python}
die() { echo "error: $*" >&2; exit 2; }

METHOD=${1:-}
shift || true
MODEL_SIZE=${MODEL_SIZE:-1.7b}
NNODES=${NNODES:-1}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
BINS=${BINS:-10}
PROMPT_SCHEDULE=${PROMPT_SCHEDULE:-paper}
LOGGER=${LOGGER:-[console,wandb]}
PRINT=${GDRO_PRINT_CMD:-0}

case "$MODEL_SIZE" in
  1.7b|4b|8b) DEFAULT_MODEL="Qwen/Qwen3-${MODEL_SIZE^^}-Base" ;;
  *) [ -n "${MODEL:-}" ] || die "MODEL_SIZE=$MODEL_SIZE is unknown: use 1.7b, 4b or 8b (or set MODEL to a model id or folder)" ;;
esac
MODEL=${MODEL:-$DEFAULT_MODEL}
EXP=${EXPERIMENT:-${METHOD//_/-}-qwen3-${MODEL_SIZE}-${BINS}bins}
CKPT=${CKPT:-$HOME/gdro_ckpt/$EXP}
RUN_DIR=${RUN_DIR:-$HOME/gdro_runs/$EXP}

# ---- the released classifiers (edges; window H; the extremes' class), per method
case "$BINS" in
  10) EDGES="[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9]"; WINDOW=50; EXTREMES=false ;;
  6)  EDGES="[0.1,0.2,0.4,0.6,0.8,0.9]"; EXTREMES=false
      if [ "$METHOD" = prompt_gdro ]; then WINDOW=100; else WINDOW=50; fi ;;
  3)  EDGES="[0.4,0.75]"; WINDOW=50; EXTREMES=true ;;
  *)  die "BINS=$BINS is unknown: use 10 (the paper), 6 or 3 (the released scripts' classifiers)" ;;
esac

# ---- one controller per run: Prompt-GDRO (weights, rollouts uniform) or Rollout-GDRO (rollouts, weights uniform)
case "$METHOD" in
  prompt_gdro)
    BATCH=256; STEPS=1000
    case "$PROMPT_SCHEDULE" in
      paper) ;;
      released) BATCH=512; STEPS=500 ;;
      *) die "PROMPT_SCHEDULE=$PROMPT_SCHEDULE is unknown: use paper (256 x 1000) or released (512 x 500)" ;;
    esac
    METHOD_ARGS=(
      data.train_batch_size=$BATCH trainer.total_training_steps=$STEPS
      actor_rollout_ref.rollout.val_kwargs.n=16 trainer.test_freq=40 trainer.val_before_train=false
      trainer.save_freq=40
      actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16
      actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4
      actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4
      actor_rollout_ref.actor.fsdp_config.param_offload=true
      actor_rollout_ref.actor.fsdp_config.optimizer_offload=true
      gdro.weighter=gdro gdro.allocator=uniform gdro.classifier_config.hysteresis=0.03
      gdro.weighter_config.eta=0.65 gdro.weighter_config.gamma=0.01 gdro.weighter_config.ema_beta=0.12
      gdro.weighter_config.max_weight=15.0 +gdro.weighter_config.share_normalize=true)
    ;;
  rollout_gdro)
    [ "$PROMPT_SCHEDULE" = paper ] || die "PROMPT_SCHEDULE is Prompt-GDRO's: Rollout-GDRO runs batch 256 x 1000 steps"
    METHOD_ARGS=(
      data.train_batch_size=256 trainer.total_training_steps=1000
      actor_rollout_ref.rollout.val_kwargs.n=8 trainer.test_freq=50 trainer.val_before_train=true
      trainer.save_freq=50
      actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4
      actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2
      actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2
      actor_rollout_ref.actor.fsdp_config.param_offload=false
      actor_rollout_ref.actor.fsdp_config.optimizer_offload=false
      actor_rollout_ref.rollout.max_num_seqs=64 actor_rollout_ref.rollout.gpu_memory_utilization=0.7
      gdro.weighter=uniform gdro.allocator=gdro gdro.classifier_config.hysteresis=0.0
      gdro.allocator_config.n_min=2 gdro.allocator_config.n_max=12 +gdro.allocator_config.eta=0.65
      +gdro.allocator_config.gamma=0.01 +gdro.allocator_config.dual_lr=0.05)
    ;;
  *) die "METHOD='$METHOD' is unknown: use prompt_gdro or rollout_gdro (paper_prompt_gdro.sh, paper_rollout_gdro.sh)" ;;
esac

# ---- data: the English rows of DAPO-Math-17k; validation on the paper's seven benchmarks, pooled
if [ -z "${VERL_DATA:-}" ]; then
  [ "$PRINT" = 1 ] && VERL_DATA=/VERL_DATA || die "set VERL_DATA to the folder with the converted parquets (docs/install.md)"
fi
VAL_SETS=(aime24 aime25 amc23 math500 minerva olympiadbench gpqa)
VAL_FILES=""
for name in "${VAL_SETS[@]}"; do VAL_FILES+="'$VERL_DATA/$name.parquet',"; done
if [ "$PRINT" != 1 ]; then
  for name in dapo_train "${VAL_SETS[@]}"; do
    [ -f "$VERL_DATA/$name.parquet" ] || die "$VERL_DATA/$name.parquet is missing: prepare the data first (docs/install.md)"
  done
  case "$LOGGER" in
    *wandb*) "$PY" -c "import wandb" 2>/dev/null || die "LOGGER=$LOGGER but wandb does not import in $PY: install it (docs/install.md) or set LOGGER=[console,file]" ;;
  esac
fi

# ---- attention: flash_attention_2 when flash-attn imports, else SDPA (one line on stderr says which)
mapfile -t ATTENTION < <(cd "$ROOT" && PYTHONPATH="$ROOT" "$PY" -m real_runs.attention --verl)
[ "${#ATTENTION[@]}" = 2 ] || die "python -m real_runs.attention failed with $PY: set PYTHON to the interpreter with verl"

CMD=("$PY" -m real_runs.verl.main
  data.train_files="'$VERL_DATA/dapo_train.parquet'" data.val_files="[${VAL_FILES%,}]"
  data.max_prompt_length=3200 data.max_response_length=4096 data.val_batch_size=128
  data.filter_overlong_prompts=true data.truncation=error
  actor_rollout_ref.model.path="$MODEL" actor_rollout_ref.model.enable_gradient_checkpointing=true
  "${ATTENTION[@]}"
  algorithm.adv_estimator=grpo algorithm.norm_adv_by_std_in_grpo=true algorithm.use_kl_in_reward=false
  gdro.adv_clip=5.0
  actor_rollout_ref.actor.optim.lr=1e-6 actor_rollout_ref.actor.ppo_mini_batch_size=128
  actor_rollout_ref.actor.ppo_epochs=1
  actor_rollout_ref.actor.use_kl_loss=true actor_rollout_ref.actor.kl_loss_coef=0.001
  actor_rollout_ref.actor.kl_loss_type=low_var_kl
  actor_rollout_ref.actor.clip_ratio_low=0.2 actor_rollout_ref.actor.clip_ratio_high=0.28
  actor_rollout_ref.actor.loss_agg_mode=token-mean actor_rollout_ref.actor.entropy_coeff=0
  actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.tensor_model_parallel_size=1
  actor_rollout_ref.rollout.n=4 actor_rollout_ref.rollout.temperature=1.0
  actor_rollout_ref.rollout.val_kwargs.do_sample=true actor_rollout_ref.rollout.val_kwargs.temperature=0.6
  actor_rollout_ref.rollout.val_kwargs.top_p=0.8 actor_rollout_ref.rollout.val_kwargs.top_k=20
  reward.custom_reward_function.path="$ROOT/real_runs/verl/reward.py" reward.custom_reward_function.name=compute_score
  trainer.nnodes="$NNODES" trainer.n_gpus_per_node="$GPUS_PER_NODE"
  trainer.max_actor_ckpt_to_keep=null trainer.resume_mode=auto
  trainer.default_local_dir="$CKPT" trainer.logger="$LOGGER"
  trainer.project_name=gdro trainer.experiment_name="$EXP"
  gdro.classifier=window gdro.classifier_config.edges="$EDGES" gdro.classifier_config.window=$WINDOW
  gdro.classifier_config.k=2 +gdro.classifier_config.exclude_extremes=$EXTREMES
  gdro.run_dir="$RUN_DIR"
  "${METHOD_ARGS[@]}" "$@")

if [ "$PRINT" = 1 ]; then
  printf '%s\n' "${CMD[@]}"
  exit 0
fi
cd "$ROOT"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
echo "gdro: $METHOD, $MODEL on $NNODES x $GPUS_PER_NODE GPUs, $BINS bins; checkpoints $CKPT, run directory $RUN_DIR" >&2
exec "${CMD[@]}"
