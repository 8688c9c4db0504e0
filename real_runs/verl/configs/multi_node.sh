#!/usr/bin/env bash
# GDRO on verl across several nodes (Ray cluster): Qwen3-8B-Base, NNODES x 8 GPUs, FSDP actor,
# vLLM rollouts with tensor parallelism 2. NOT RUN YET (see README "Scaling out with verl").
# 1. Start Ray: on the head node   `ray start --head --port=6379`
#               on every other node `ray start --address=<head-ip>:6379`
# 2. On the head node, from this repository (installed with `pip install --no-deps -e .` on every
#    node, same path, or shipped with ray's runtime_env working_dir), run this script.
# The controllers run on the driver only (a few ms per step); their state is saved with every
# checkpoint in $CKPT/global_step_N/gdro_ctrl.json, so CKPT must be on storage the head node keeps.
set -euo pipefail
DATA=${DATA:?set DATA to the folder with the converted parquets}
NNODES=${NNODES:-4}
MODEL=${MODEL:-Qwen/Qwen3-8B-Base}
CKPT=${CKPT:-/shared/gdro_ckpt/qwen3-8b-gdro}
RUN_DIR=${RUN_DIR:-/shared/gdro_runs/qwen3-8b-gdro}

exec "$(dirname "$0")/one_node_8gpu.sh" \
  trainer.nnodes="$NNODES" trainer.n_gpus_per_node=8 \
  actor_rollout_ref.model.path="$MODEL" \
  data.train_batch_size=512 actor_rollout_ref.actor.ppo_mini_batch_size=128 \
  actor_rollout_ref.rollout.tensor_model_parallel_size=2 \
  actor_rollout_ref.actor.fsdp_config.param_offload=false \
  trainer.default_local_dir="$CKPT" gdro.run_dir="$RUN_DIR" \
  trainer.experiment_name=qwen3-8b-gdro \
  "$@"
