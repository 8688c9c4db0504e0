#!/usr/bin/env bash
# GDRO on verl across several nodes (Ray cluster): Qwen3-8B-Base, NNODES x 8 GPUs, FSDP actor,
# vLLM rollouts with tensor parallelism 2. NOT RUN YET (see README "Scaling out with verl").
# Every node: the same Python environment and this repository at the same path (e.g. on the shared
# filesystem). Then (docs/verl-cluster.md), from the repository root:
# 1. head node:        scripts/ray_cluster.sh head
#    every other node: scripts/ray_cluster.sh worker <head-ip>:6379
#    head node:        scripts/ray_cluster.sh check "$CKPT" "$RUN_DIR"
# 2. head node: this script. It joins the running cluster (RAY_ADDRESS=auto: no cluster, no launch) and
#    passes PYTHONPATH, HF_*, WANDB_* and GDRO_* to every worker through Ray's runtime_env.
# CKPT and RUN_DIR must be one shared filesystem mounted at the same path on every node: every FSDP rank
# writes its own shard of each checkpoint into CKPT (the controllers' gdro_ctrl.json goes there too) and
# verl's task runner, on whichever node Ray places it, writes RUN_DIR. The launch checks this first.
set -euo pipefail
export RAY_ADDRESS=${RAY_ADDRESS:-auto}
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
