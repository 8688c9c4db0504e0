#!/usr/bin/env bash
# The Ray cluster a multi-node verl launch runs on (docs/verl-cluster.md). Run from the repository root,
# in the Python environment that has verl (the same environment and repository path on every node).
#
#   scripts/ray_cluster.sh head [RAY_START_OPTION...]              on the head node; prints the worker command
#   scripts/ray_cluster.sh worker HEAD_IP:PORT [RAY_START_OPTION...] on every other node
#   scripts/ray_cluster.sh check FOLDER [FOLDER...]                on the head: every alive node sees these
#                                                                  folders (the checkpoint folder, the run dir)
#   scripts/ray_cluster.sh status                                  the nodes and their GPUs (`ray status`)
#   scripts/ray_cluster.sh stop                                    stop Ray on this node (`ray stop`)
#
# Environment: RAY (the ray command, default `ray`), RAY_PORT (the head's port, default 6379), PYTHON (for
# check, default `python`), RAY_AUTH_MODE (default token). Workers inherit the environment of the shell
# that ran `ray start` on their node; the launcher also passes PYTHONPATH, HF_*, WANDB_* and GDRO_* from
# the launching shell through Ray's runtime_env. Exit codes: 2 on a usage error, a missing token or a
# failed check, else ray's own.
#
# Token authentication (Ray 2.60, as verl 0.9.1 installs it here): a head started while ~/.ray/auth_token exists (any earlier local
# `ray.init()` of this user writes one) requires it from every node, and a worker started without
# RAY_AUTH_MODE=token cannot join. So one mode for all: head and worker run with RAY_AUTH_MODE=token
# unless it is set; the head creates ~/.ray/auth_token if missing; every worker needs the same token
# (a shared home, RAY_AUTH_TOKEN_PATH, or RAY_AUTH_TOKEN="$(ray get-auth-token)" printed on the head).
# RAY_AUTH_MODE=disabled on every node turns it off.
set -euo pipefail

RAY=${RAY:-ray}
export RAY_AUTH_MODE=${RAY_AUTH_MODE:-token}
usage() {
  sed -n '4,10p' "$0" | sed 's/^# \{0,1\}//' >&2
}
has_token() {
  [ -n "${RAY_AUTH_TOKEN:-}" ] || [ -s "${RAY_AUTH_TOKEN_PATH:-$HOME/.ray/auth_token}" ]
}

command=${1:-}
[ $# -gt 0 ] && shift
case "$command" in
  head)
    port=${RAY_PORT:-6379}
    ip=$(hostname -I 2>/dev/null | awk '{print $1}') || true
    if [ "$RAY_AUTH_MODE" = token ] && ! has_token; then
      "$RAY" get-auth-token --generate > /dev/null 2>&1 || {  # writes ~/.ray/auth_token
        echo "ray_cluster: could not create the Ray auth token (ray get-auth-token --generate)" >&2
        exit 2
      }
    fi
    echo "ray_cluster: starting the head on port $port; then, on every other node: scripts/ray_cluster.sh worker ${ip:-<head-ip>}:$port"
    [ "$RAY_AUTH_MODE" = token ] && echo "ray_cluster: token authentication is on: every node needs this node's token (a shared home, or RAY_AUTH_TOKEN=\"\$(ray get-auth-token)\" from here)"
    exec "$RAY" start --head --port="$port" "$@"
    ;;
  worker)
    if [ $# -lt 1 ] || [[ "$1" != *:* ]]; then
      echo "ray_cluster: worker needs the head's address, e.g. scripts/ray_cluster.sh worker 10.0.0.1:6379" >&2
      exit 2
    fi
    address=$1
    shift
    if [ "$RAY_AUTH_MODE" = token ] && ! has_token; then
      echo "ray_cluster: no Ray auth token on this node: export RAY_AUTH_TOKEN=<the output of \`ray get-auth-token\` on the head> (or share ~/.ray/auth_token), or set RAY_AUTH_MODE=disabled on every node" >&2
      exit 2
    fi
    exec "$RAY" start --address="$address" "$@"
    ;;
  check)
    if [ $# -lt 1 ]; then
      echo "ray_cluster: check needs the folders every node must see, e.g. scripts/ray_cluster.sh check \"\$CKPT\" \"\$RUN_DIR\"" >&2
      exit 2
    fi
    exec "${PYTHON:-python}" -m real_runs.verl.cluster check "$@"
    ;;
  status)
    exec "$RAY" status "$@"
    ;;
  stop)
    exec "$RAY" stop "$@"
    ;;
  *)
    usage
    exit 2
    ;;
esac
