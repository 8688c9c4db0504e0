"""Several nodes: the shared-filesystem check and the environment passed to every Ray worker.

``python -m real_runs.verl.cluster check FOLDER [FOLDER ...]`` checks a running Ray cluster;
:func:`check_shared_folders` (every node sees the folders), :func:`runtime_env_vars` (secrets left out;
:func:`task_runner_secrets`). Why: docs/verl-notes.md#real_runs-verl-cluster.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from real_runs.verl import VerlPluginError

MARKER_PREFIX = ".gdro_shared_fs_"
EXTRA_ENV = "GDRO_RAY_ENV"  # comma-separated names of further variables to pass to every worker
PASSED_ENV = ("HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE",
              "HF_ENDPOINT")
PASSED_PREFIXES = ("GDRO_", "WANDB_")
SECRET_ENV = ("WANDB_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
CODE_ROOT = str(Path(__file__).resolve().parents[2])
WHY = {
    "trainer.default_local_dir": "every FSDP rank writes its own checkpoint shard there",
    "gdro.run_dir": "the controllers write it from verl's task runner, which Ray may place on any node",
}


# ---------------------------------------------------------------------- the environment


def runtime_env_vars(environ: Mapping[str, str], code_root: str = CODE_ROOT) -> dict[str, str]:
    """What every Ray worker gets in its environment: ``PYTHONPATH`` = code_root[:driver's], the
    variables of :data:`PASSED_ENV`, those starting with :data:`PASSED_PREFIXES` and those named in
    ``GDRO_RAY_ENV``, as the launching shell has them; secrets only when named in ``GDRO_RAY_ENV``."""
    listed = {name.strip() for name in environ.get(EXTRA_ENV, "").split(",") if name.strip()}
    chosen = {name for name in environ if name in PASSED_ENV or name.startswith(PASSED_PREFIXES)}
    names = (chosen - set(SECRET_ENV)) | listed
    env = {name: environ[name] for name in sorted(names) if name in environ and name != "PYTHONPATH"}
    driver_path = environ.get("PYTHONPATH", "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (code_root, driver_path) if p)
    return env


def task_runner_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """The secrets verl's task runner gets as constructor arguments (never printed, never in runtime_env)."""
    return {name: environ[name] for name in SECRET_ENV if environ.get(name)}


def add_runtime_env(config: Any, environ: Mapping[str, str], code_root: str = CODE_ROOT) -> dict[str, str]:
    """Put :func:`runtime_env_vars` under ``config.ray_kwargs.ray_init.runtime_env.env_vars``, where
    verl 0.9.1's ``run_ppo`` merges it over its own defaults; entries already in the config win.
    Returns the resulting ``env_vars``."""
    from omegaconf import open_dict

    with open_dict(config):
        if config.ray_kwargs.ray_init.get("runtime_env") is None:
            config.ray_kwargs.ray_init.runtime_env = {}
        runtime_env = config.ray_kwargs.ray_init.runtime_env
        own = runtime_env.get("env_vars") or {}
        merged = {**runtime_env_vars(environ, code_root), **{str(k): str(v) for k, v in own.items()}}
        runtime_env.env_vars = merged
    return merged


class SecretsRunner:
    """What verl's ``run_ppo`` calls ``.remote()`` (or ``.options(...).remote()``) on: the task
    runner actor class, created with the secrets as its constructor argument."""

    def __init__(self, actor_class: Any, secrets_env: Mapping[str, str], options: Mapping[str, Any] | None = None):
        self.actor_class, self.secrets_env, self._options = actor_class, dict(secrets_env), dict(options or {})

    def options(self, **kwargs: Any) -> "SecretsRunner":
        return SecretsRunner(self.actor_class, self.secrets_env, {**self._options, **kwargs})

    def remote(self) -> Any:
        target = self.actor_class.options(**self._options) if self._options else self.actor_class
        return target.remote(self.secrets_env)


# ---------------------------------------------------------------------- the shared-filesystem check


@dataclass(frozen=True)
class Node:
    """An alive Ray node: its id (for node affinity) and how the error names it."""

    node_id: str
    label: str


def alive_nodes() -> list[Node]:
    """The cluster's alive nodes, from ``ray.nodes()``."""
    import ray

    return [Node(n["NodeID"], f"{n.get('NodeManagerAddress', '?')} ({n.get('NodeManagerHostname', '?')}, "
                              f"node {n['NodeID'][:8]})")
            for n in ray.nodes() if n.get("Alive")]


def read_markers(paths: Sequence[str], wait_s: float = 10.0) -> dict[str, Any]:
    """On one node: the text of each marker file (None if it cannot be read within ``wait_s``;
    retried, for network filesystems that show a new file late), the host and working directory."""
    deadline = time.monotonic() + wait_s
    texts: list[str | None] = [None] * len(paths)
    while True:
        for index, path in enumerate(paths):
            if texts[index] is None:
                try:
                    texts[index] = Path(path).read_text()
                except OSError:
                    pass
        if all(t is not None for t in texts) or time.monotonic() >= deadline:
            return {"texts": texts, "host": socket.gethostname(), "cwd": os.getcwd()}
        time.sleep(0.5)


def ray_read_all(nodes: Sequence[Node], paths: Sequence[str], timeout_s: float = 120.0) -> dict[str, Any]:
    """:func:`read_markers` on every node, one Ray task each (pinned, 0 CPUs); an answer or the error."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(num_cpus=0, max_retries=0)(read_markers)
    refs = {node.node_id: task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
                                       name="gdro_shared_fs_check").remote(list(paths))
            for node in nodes}
    ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout_s)
    answers: dict[str, Any] = {}
    for node_id, ref in refs.items():
        if ref not in ready:
            ray.cancel(ref, force=True)
            answers[node_id] = TimeoutError(f"no answer within {timeout_s:.0f} s")
            continue
        try:
            answers[node_id] = ray.get(ref)
        except Exception as err:  # noqa: BLE001 (any failure on the node is reported, in one line)
            answers[node_id] = err
    return answers


def first_line(err: BaseException) -> str:
    """An error in one line: the original exception of a Ray task error, its last non-empty line."""
    cause = getattr(err, "cause", None) or err
    lines = [line.strip() for line in str(cause).splitlines() if line.strip()]
    return f"{type(cause).__name__}: {lines[-1] if lines else ''}".rstrip(": ")


def check_shared_folders(folders: Mapping[str, str], nodes: Sequence[Node],
                         read_all: Callable[[Sequence[Node], Sequence[str]], Mapping[str, Any]] = ray_read_all
                         ) -> str:
    """Write a marker with a random token into each folder (setting -> path), have every node read
    them (``read_all``), remove them; raise :class:`VerlPluginError` naming the first node that cannot.

    Returns the one-line summary. A relative path is read against each node's working directory,
    as verl's workers resolve it.
    """
    token = secrets.token_hex(16)
    writer = socket.gethostname()
    markers: dict[str, Path] = {}
    try:
        for setting, folder in folders.items():
            Path(folder).mkdir(parents=True, exist_ok=True)
            marker = Path(folder) / f"{MARKER_PREFIX}{token}"
            marker.write_text(token)
            markers[setting] = marker
        answers = read_all(nodes, [str(Path(folder) / f"{MARKER_PREFIX}{token}") for folder in folders.values()])
        for node in nodes:
            answer = answers.get(node.node_id, TimeoutError("no answer"))
            if isinstance(answer, BaseException):
                raise VerlPluginError(
                    f"node {node.label} could not run the shared-filesystem check ({first_line(answer)}): every "
                    "node needs this repository at the same path (it is put on PYTHONPATH) or installed in its "
                    "environment, and a running raylet")
            for (setting, folder), text in zip(folders.items(), answer["texts"]):
                if text != token:
                    raise VerlPluginError(_not_shared(setting, folder, node, answer, writer))
    finally:
        for marker in markers.values():
            marker.unlink(missing_ok=True)
    names = ", ".join(f"{setting}={folder}" for setting, folder in folders.items())
    return f"shared filesystem: all {len(nodes)} node(s) see {names}"


def _not_shared(setting: str, folder: str, node: Node, answer: Mapping[str, Any], writer: str) -> str:
    relative = "" if Path(folder).is_absolute() else (
        f" (a relative path: node {node.label} resolves it against its working directory {answer['cwd']}; "
        "give an absolute path)")
    return (f"{setting}={folder} is not one shared filesystem: node {node.label} cannot see the marker file that "
            f"{writer} wrote there{relative}; {WHY.get(setting, 'every node writes there')}, so it must be a "
            "shared filesystem (NFS, Lustre, ...) mounted at the same path on every node")


def folders_to_check(config: Any) -> dict[str, str]:
    """The folders every node must share: the checkpoint folder (unless this launch neither saves
    nor resumes) and the run directory (if set)."""
    trainer = config.trainer
    folders = {}
    if int(trainer.get("save_freq", -1)) > 0 or trainer.get("resume_mode", "auto") != "disable":
        folders["trainer.default_local_dir"] = str(trainer.default_local_dir)
    run_dir = config.get("gdro", {}).get("run_dir") if hasattr(config, "get") else None
    if run_dir:
        folders["gdro.run_dir"] = str(run_dir)
    return folders


def check_cluster(config: Any) -> str:
    """:func:`check_shared_folders` over the config's folders and the cluster's alive nodes."""
    folders = folders_to_check(config)
    if not folders:
        return "shared filesystem: nothing to check (no checkpoint folder or run directory is used)"
    return check_shared_folders(folders, alive_nodes())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m real_runs.verl.cluster",
                                     description="Check a running Ray cluster before a multi-node launch.")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="every alive node sees these folders (one shared filesystem)")
    check.add_argument("folders", nargs="+", help="e.g. the checkpoint folder and the run directory")
    check.add_argument("--address", default=os.environ.get("RAY_ADDRESS", "auto"),
                       help="the cluster (default: RAY_ADDRESS, else the one started on this node)")
    args = parser.parse_args(argv)
    import ray

    try:
        ray.init(address=args.address, runtime_env={"env_vars": runtime_env_vars(os.environ)},
                 log_to_driver=False)
    except ConnectionError as err:
        print(f"error: no Ray cluster at {args.address} ({first_line(err)}): start one with "
              "scripts/ray_cluster.sh head", file=sys.stderr)
        return 2
    try:
        nodes = alive_nodes()
        print(check_shared_folders({f"folder {i + 1}": f for i, f in enumerate(args.folders)}, nodes))
        print("nodes: " + "; ".join(node.label for node in nodes))
    except VerlPluginError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    from real_runs.verl import cluster  # the importable module, so Ray pickles read_markers by reference

    sys.exit(cluster.main())
