#!/usr/bin/env bash
# Rollout-GDRO as published (arXiv 2601.19280): Qwen3-<MODEL_SIZE>-Base, one 8-GPU node by default.
#   MODEL_SIZE=1.7b|4b|8b VERL_DATA=... bash real_runs/verl/configs/paper_rollout_gdro.sh [hydra overrides...]
# Knobs and settings: paper_run.sh; each setting's source: real_runs/verl/paper_settings.py (docs/launch.md).
exec "$(dirname "${BASH_SOURCE[0]}")/paper_run.sh" rollout_gdro "$@"
