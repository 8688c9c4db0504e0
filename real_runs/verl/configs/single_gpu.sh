#!/usr/bin/env bash
# A single-GPU example: the paper's recipe (paper_run.sh) on ONE GPU with a small model, Qwen3-0.6B-Base.
#   VERL_DATA=... bash real_runs/verl/configs/single_gpu.sh [hydra overrides...]
#   METHOD=prompt_gdro|rollout_gdro (default rollout_gdro); MODEL=<id or folder> for another model.
# Every setting is the paper run's except the model, the GPU count and no validation before step 1 (the
# paper's pooled validation, 1,745 prompts x 8 samples of up to 4,096 tokens, before any training step;
# trainer.val_before_train=true restores it). The batch, 256 prompts x 4 rollouts of up
# to 4,096 tokens, is the same: a step takes minutes. A first look: add trainer.total_training_steps=20
# (verl validates at the last step; trainer.test_freq=-1 skips that too).
# Memory: docs/launch.md ("One GPU") gives the logits' size per micro-batch (paper_settings.logits_gb).
export MODEL=${MODEL:-Qwen/Qwen3-0.6B-Base} MODEL_SIZE=${MODEL_SIZE:-0.6b} NNODES=1 GPUS_PER_NODE=1
exec "$(dirname "${BASH_SOURCE[0]}")/paper_run.sh" "${METHOD:-rollout_gdro}" trainer.val_before_train=false "$@"
