#!/usr/bin/env bash
# One GPU environment in one command, from its lock (docs/install.md):
#
#   bash scripts/install_gpu_env.sh verl  .venv-verl-gpu    # the verl plugin: verl 0.9.1, vLLM 0.24.0, torch 2.11.0
#   bash scripts/install_gpu_env.sh train .venv-train-gpu   # gdro train with vLLM 0.32.0, torch 2.13.0
#
# Makes a virtualenv DIR with CPython 3.11 (PYTHON, default python3.11; the locks are resolved for
# 3.11 on Linux x86_64 with glibc >= 2.28), installs every package of constraints/gpu-ENV.txt at its
# locked version (PyPI's CUDA wheels of torch; pip's own index settings apply, so a mirror works),
# then this repository in editable mode without dependencies, and runs `pip check`.
# flash-attn is not installed (no wheel; see docs/install.md): the launch paths use SDPA without it.
# --print shows the commands and runs nothing. Exit status: 0 done, 2 bad usage, else pip's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
usage="usage: bash scripts/install_gpu_env.sh [--print] verl|train DIR"

dry=0
if [ "${1:-}" = --print ]; then dry=1; shift; fi
if [ $# -ne 2 ]; then echo "install_gpu_env: $usage" >&2; exit 2; fi
env=$1 dir=$2
lock="constraints/gpu-$env.txt"
case "$env" in
  verl|train) ;;
  *) echo "install_gpu_env: unknown environment '$env': choose verl or train ($usage)" >&2; exit 2;;
esac
if [ -e "$dir" ] && [ ! -x "$dir/bin/python" ]; then
  echo "install_gpu_env: $dir exists and is not a virtualenv: choose another DIR (nothing was changed)" >&2; exit 2
fi
PY=${PYTHON:-python3.11}
if [ "$dry" = 0 ]; then
  command -v "$PY" >/dev/null 2>&1 || { echo "install_gpu_env: $PY not found: install CPython 3.11 or set PYTHON" >&2; exit 2; }
  version=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if [ "$version" != 3.11 ]; then
    echo "install_gpu_env: $PY is Python $version; the locks are for 3.11: set PYTHON to a python3.11" >&2; exit 2
  fi
fi

step() {  # step COMMAND...: print it, run it unless --print
  echo "+ $*"
  if [ "$dry" = 0 ]; then "$@"; fi
}
step "$PY" -m venv "$dir"
step "$dir/bin/python" -m pip install -r "$lock"
step "$dir/bin/python" -m pip install --no-deps -e .
step "$dir/bin/python" -m pip check
[ "$dry" = 1 ] || echo "install_gpu_env: $env environment ready in $dir ($lock)"
