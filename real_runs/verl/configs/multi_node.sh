#!/usr/bin/env bash
# The paper's runs across several nodes (a Ray cluster): NNODES x 8 GPUs, Qwen3-8B-Base by default.
#   METHOD=rollout_gdro|prompt_gdro NNODES=4 MODEL_SIZE=8b VERL_DATA=... bash real_runs/verl/configs/multi_node.sh
# Every node: the same Python environment and this repository at the same path. Then
# (docs/verl-cluster.md), from the repository root:
# 1. head node:        scripts/ray_cluster.sh head
#    every other node: scripts/ray_cluster.sh worker <head-ip>:6379
#    head node:        scripts/ray_cluster.sh check "$CKPT" "$RUN_DIR"
# 2. head node: this script. It joins the running cluster (RAY_ADDRESS=auto: no cluster, no launch) and
#    passes PYTHONPATH, HF_*, WANDB_* and GDRO_* to every worker through Ray's runtime_env.
# VERL_DATA, CKPT and RUN_DIR must be one shared filesystem mounted at the same path on every node:
# every FSDP rank writes its own shard of each checkpoint into CKPT (the controllers' gdro_ctrl.json
# goes there too) and verl's task runner, on whichever node Ray places it, writes RUN_DIR. The launch
# checks this first; this script refuses to start without CKPT and RUN_DIR set (their defaults under
# $HOME are one node's disk on most clusters). Same settings as one node (paper_run.sh); only the GPU
# count differs.
for name in CKPT:gdro_ckpt RUN_DIR:gdro_runs; do
  folder=${name#*:} name=${name%:*}
  if [ -z "${!name:-}" ]; then
    echo "error: multi_node.sh needs $name on the shared filesystem, at the same path on every node (e.g. $name=/shared/$folder/<run>): its default under \$HOME is one node's disk on most clusters; check both with scripts/ray_cluster.sh check \"\$CKPT\" \"\$RUN_DIR\"" >&2
    exit 2
  fi
done
export RAY_ADDRESS=${RAY_ADDRESS:-auto}
export NNODES=${NNODES:-4} GPUS_PER_NODE=${GPUS_PER_NODE:-8} MODEL_SIZE=${MODEL_SIZE:-8b}
exec "$(dirname "${BASH_SOURCE[0]}")/paper_run.sh" "${METHOD:-rollout_gdro}" "$@"
