#!/usr/bin/env bash
# A single-GPU example: the paper's recipe (paper_run.sh) on ONE GPU with a small model, Qwen3-0.6B-Base.
#   VERL_DATA=... bash real_runs/verl/configs/single_gpu.sh [hydra overrides...]
#   METHOD=prompt_gdro|rollout_gdro (default rollout_gdro); MODEL=<id or folder> for another model.
# Every setting is the paper run's except the model and the GPU count (the batch, 256 prompts x 4 rollouts
# of up to 4,096 tokens, is the same: a step takes minutes). A first look: add trainer.total_training_steps=20.
export MODEL=${MODEL:-Qwen/Qwen3-0.6B-Base} MODEL_SIZE=${MODEL_SIZE:-0.6b} NNODES=1 GPUS_PER_NODE=1
exec "$(dirname "${BASH_SOURCE[0]}")/paper_run.sh" "${METHOD:-rollout_gdro}" "$@"
