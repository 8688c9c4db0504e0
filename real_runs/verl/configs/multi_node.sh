#!/usr/bin/env bash
# The paper's runs across several nodes (a Ray cluster): NNODES x 8 GPUs, Qwen3-8B-Base by default.
#   METHOD=rollout_gdro|prompt_gdro NNODES=4 MODEL_SIZE=8b VERL_DATA=... bash real_runs/verl/configs/multi_node.sh
# Start Ray first (docs/launch.md): on the head node `ray start --head --port=6379`, on every other node
# `ray start --address=<head-ip>:6379`; then run this script on the head node. The repository, VERL_DATA
# and CKPT must be at the same paths on every node (CKPT on one shared filesystem: every FSDP rank writes
# its own shard). Same settings as one node (paper_run.sh); only the GPU count differs.
export NNODES=${NNODES:-4} GPUS_PER_NODE=${GPUS_PER_NODE:-8} MODEL_SIZE=${MODEL_SIZE:-8b}
exec "$(dirname "${BASH_SOURCE[0]}")/paper_run.sh" "${METHOD:-rollout_gdro}" "$@"
