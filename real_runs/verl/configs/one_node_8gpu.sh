#!/usr/bin/env bash
# GDRO on verl, one node with 8 GPUs (FSDP actor, vLLM rollouts): Qwen3-1.7B-Base on DAPO-Math-17k,
# the paper's Prompt-GDRO + Rollout-GDRO settings (batch 256, rollout.n = n_bar = 4, n in [2, 12]).
# NOT RUN YET: written from verl 0.9.1's config schema (see README "Scaling out with verl").
# Prepare the data once (ids in extra_info.index):
#   python -m real_runs.verl.convert dapo_math_17k  $DATA/dapo_train.parquet
#   python -m real_runs.verl.convert math500        $DATA/math500.parquet
set -euo pipefail
DATA=${DATA:?set DATA to the folder with the converted parquets}
MODEL=${MODEL:-Qwen/Qwen3-1.7B-Base}
CKPT=${CKPT:-$HOME/gdro_ckpt/qwen3-1.7b-gdro}
RUN_DIR=${RUN_DIR:-$HOME/gdro_runs/qwen3-1.7b-gdro}
REWARD=$(python -c "import real_runs.verl.reward as m; print(m.__file__)")

python -m real_runs.verl.main \
  data.train_files="$DATA/dapo_train.parquet" data.val_files="$DATA/math500.parquet" \
  data.train_batch_size=256 data.max_prompt_length=1024 data.max_response_length=4096 \
  data.filter_overlong_prompts=true data.truncation=error \
  actor_rollout_ref.model.path="$MODEL" \
  actor_rollout_ref.actor.optim.lr=1e-6 \
  actor_rollout_ref.actor.ppo_mini_batch_size=64 \
  actor_rollout_ref.actor.use_dynamic_bsz=true actor_rollout_ref.actor.ppo_max_token_len_per_gpu=16384 \
  actor_rollout_ref.actor.use_kl_loss=false actor_rollout_ref.actor.entropy_coeff=0 \
  actor_rollout_ref.actor.clip_ratio_low=0.2 actor_rollout_ref.actor.clip_ratio_high=0.28 \
  actor_rollout_ref.actor.loss_agg_mode=token-mean \
  actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.n=4 \
  actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \
  actor_rollout_ref.rollout.temperature=1.0 \
  actor_rollout_ref.rollout.val_kwargs.n=8 actor_rollout_ref.rollout.val_kwargs.do_sample=true \
  algorithm.adv_estimator=grpo algorithm.use_kl_in_reward=false \
  reward.custom_reward_function.path="$REWARD" reward.custom_reward_function.name=compute_score \
  trainer.n_gpus_per_node=8 trainer.nnodes=1 \
  trainer.total_training_steps=1000 trainer.save_freq=50 trainer.test_freq=50 \
  trainer.logger='[console,wandb]' trainer.project_name=gdro trainer.experiment_name=qwen3-1.7b-gdro \
  trainer.default_local_dir="$CKPT" trainer.resume_mode=auto \
  gdro.weighter=gdro gdro.allocator=gdro gdro.run_dir="$RUN_DIR" \
  "$@"
