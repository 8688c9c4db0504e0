"""Several nodes without a cluster: the shared-filesystem check against fake nodes, the environment
passed through Ray's runtime_env (through verl 0.9.1's own run_ppo), the secrets, and
scripts/ray_cluster.sh's usage errors. The real Ray runs are in test_cluster_ray.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs these)")
from verl_helpers import compose_config  # noqa: E402

from real_runs.verl import (
    VerlPluginError,  # noqa: E402
    cluster,  # noqa: E402
)

ROOT = Path(__file__).resolve().parents[3]
NODES = [cluster.Node("a" * 56, "10.0.0.1 (head)"), cluster.Node("b" * 56, "10.0.0.2 (gpu-2)")]


def _reader(local_roots: dict[str, Path]):
    """Fake nodes: node -> the root its filesystem is mounted at (the shared one, or a disk of its own)."""
    seen: list[list[str]] = []

    def read_all(nodes, paths):
        seen.append(list(paths))
        answers = {}
        for node in nodes:
            root = local_roots.get(node.node_id)
            mapped = [str(root / Path(p).relative_to("/")) if root else p for p in paths]
            answers[node.node_id] = cluster.read_markers(mapped, wait_s=0.0)
        return answers

    return read_all, seen


def test_every_node_seeing_the_folders_passes_and_leaves_no_marker(tmp_path):
    folders = {"trainer.default_local_dir": str(tmp_path / "ckpt"), "gdro.run_dir": str(tmp_path / "run")}
    read_all, seen = _reader({})
    summary = cluster.check_shared_folders(folders, NODES, read_all)
    assert summary.startswith("shared filesystem: all 2 node(s) see trainer.default_local_dir=")
    assert len(seen) == 1 and [Path(p).parent for p in seen[0]] == [tmp_path / "ckpt", tmp_path / "run"]
    assert all(Path(p).name.startswith(cluster.MARKER_PREFIX) for p in seen[0])
    assert list((tmp_path / "ckpt").iterdir()) == [] and list((tmp_path / "run").iterdir()) == []


def test_a_node_with_its_own_disk_fails_the_launch_naming_it_and_the_fix(tmp_path):
    shared, own_disk = tmp_path / "shared", tmp_path / "node2_disk"
    folders = {"trainer.default_local_dir": str(shared / "ckpt")}
    (own_disk / str(shared / "ckpt").lstrip("/")).mkdir(parents=True)  # the same path exists there, empty
    read_all, _ = _reader({NODES[1].node_id: own_disk})
    with pytest.raises(VerlPluginError) as err:
        cluster.check_shared_folders(folders, NODES, read_all)
    message = str(err.value)
    assert "\n" not in message and "node 10.0.0.2 (gpu-2) cannot see the marker" in message
    assert f"trainer.default_local_dir={shared / 'ckpt'} is not one shared filesystem" in message
    assert "every FSDP rank writes its own checkpoint shard" in message and "same path on every node" in message
    assert "10.0.0.1" not in message  # the node that does see it is not blamed
    assert list((shared / "ckpt").iterdir()) == []  # the marker is removed on failure too


def test_a_stale_marker_with_another_token_is_not_taken_for_the_fresh_one(tmp_path):
    folders = {"gdro.run_dir": str(tmp_path / "run")}

    def read_all(nodes, paths):  # a node whose view of the file is an old copy
        return {node.node_id: {"texts": ["0" * 32], "host": "h", "cwd": "/"} for node in nodes}

    with pytest.raises(VerlPluginError, match="gdro.run_dir=.* the controllers write it from verl's task runner"):
        cluster.check_shared_folders(folders, NODES[:1], read_all)


def test_a_relative_path_names_the_nodes_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def read_all(nodes, paths):
        return {node.node_id: {"texts": [None], "host": "h", "cwd": "/home/ray"} for node in nodes}

    with pytest.raises(VerlPluginError, match="resolves it against its working directory /home/ray; give an "
                                              "absolute path"):
        cluster.check_shared_folders({"trainer.default_local_dir": "checkpoints/x"}, NODES[:1], read_all)


def test_a_node_that_cannot_run_the_check_is_named_with_its_error(tmp_path):
    def read_all(nodes, paths):
        return {NODES[0].node_id: {"texts": [Path(paths[0]).read_text()], "host": "h", "cwd": "/"},
                NODES[1].node_id: ModuleNotFoundError("No module named 'real_runs'")}

    with pytest.raises(VerlPluginError) as err:
        cluster.check_shared_folders({"gdro.run_dir": str(tmp_path)}, NODES, read_all)
    message = str(err.value)
    assert message.startswith("node 10.0.0.2 (gpu-2) could not run the shared-filesystem check "
                              "(ModuleNotFoundError: No module named 'real_runs')")
    assert "same path" in message and "\n" not in message


def test_read_markers_waits_for_a_file_that_appears_late(tmp_path):
    import threading

    target = tmp_path / "late"
    timer = threading.Timer(0.6, lambda: target.write_text("tok"))
    timer.start()
    answer = cluster.read_markers([str(target)], wait_s=5.0)
    timer.join()
    assert answer["texts"] == ["tok"]
    assert cluster.read_markers([str(tmp_path / "never")], wait_s=0.0)["texts"] == [None]


@pytest.mark.parametrize("overrides, expected", [
    ([], {"trainer.default_local_dir", "gdro.run_dir"}),
    (["trainer.save_freq=-1", "trainer.resume_mode=disable"], {"gdro.run_dir"}),
    (["trainer.save_freq=-1", "trainer.resume_mode=disable", "gdro.run_dir=null"], set()),
    (["trainer.save_freq=-1"], {"trainer.default_local_dir", "gdro.run_dir"}),  # resume reads it
])
def test_the_folders_checked(overrides, expected):
    config = compose_config(["actor_rollout_ref.rollout.n=4", "trainer.save_freq=10", "gdro.run_dir=/shared/run",
                             "trainer.default_local_dir=/shared/ckpt", *overrides])
    assert set(cluster.folders_to_check(config)) == expected


ENV = {"HF_HOME": "/shared/hf", "HF_HUB_OFFLINE": "1", "WANDB_PROJECT": "gdro", "WANDB_API_KEY": "secret-wandb",
       "HF_TOKEN": "secret-hf", "GDRO_DATA": "/shared/data", "PYTHONPATH": "/opt/extra", "HOME": "/root",
       "MY_SETTING": "x", "CUDA_VISIBLE_DEVICES": "0"}


def test_runtime_env_vars_pass_the_environment_but_no_secret():
    env = cluster.runtime_env_vars(ENV, code_root="/repo")
    assert env == {"HF_HOME": "/shared/hf", "HF_HUB_OFFLINE": "1", "WANDB_PROJECT": "gdro",
                   "GDRO_DATA": "/shared/data", "PYTHONPATH": "/repo:/opt/extra"}
    assert cluster.task_runner_secrets(ENV) == {"WANDB_API_KEY": "secret-wandb", "HF_TOKEN": "secret-hf"}


def test_gdro_ray_env_adds_names_and_can_opt_a_secret_in():
    env = cluster.runtime_env_vars({**ENV, "GDRO_RAY_ENV": "MY_SETTING, HF_TOKEN,NOT_SET"}, code_root="/repo")
    assert env["MY_SETTING"] == "x" and env["HF_TOKEN"] == "secret-hf" and "NOT_SET" not in env
    assert "WANDB_API_KEY" not in env and "HOME" not in env and "CUDA_VISIBLE_DEVICES" not in env


class _FakeActorClass:
    """Stands in for ``ray.remote(TaskRunner)``: records the constructor arguments and options."""

    calls: list = []

    def __init__(self, options=None):
        self.opts = options or {}

    def options(self, **kwargs):
        return _FakeActorClass({**self.opts, **kwargs})

    def remote(self, *args):
        _FakeActorClass.calls.append((self.opts, args))
        return self

    @property
    def run(self):  # runner.run.remote(config): the task runner's job, not recorded
        from types import SimpleNamespace

        return SimpleNamespace(remote=lambda config: None)


def test_verls_run_ppo_starts_ray_with_the_passed_environment(monkeypatch, capsys):
    """verl 0.9.1's own run_ppo (ray.init replaced by a recorder) with add_runtime_env's config."""
    import ray
    from verl.trainer.main_ppo import run_ppo

    config = compose_config(["actor_rollout_ref.rollout.n=4",
                             "+ray_kwargs.ray_init.runtime_env.env_vars.WANDB_PROJECT=from_config"])
    passed = cluster.add_runtime_env(config, ENV, code_root="/repo")
    assert passed["WANDB_PROJECT"] == "from_config"  # the user's explicit entry wins
    recorded = {}
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kwargs: recorded.update(kwargs))
    monkeypatch.setattr(ray, "get", lambda ref: None)
    _FakeActorClass.calls = []
    run_ppo(config, task_runner_class=cluster.SecretsRunner(_FakeActorClass(), cluster.task_runner_secrets(ENV)))
    env_vars = recorded["runtime_env"]["env_vars"]
    for name, value in {"HF_HOME": "/shared/hf", "HF_HUB_OFFLINE": "1", "GDRO_DATA": "/shared/data",
                        "PYTHONPATH": "/repo:/opt/extra", "WANDB_PROJECT": "from_config"}.items():
        assert env_vars[name] == value, name
    assert "VLLM_LOGGING_LEVEL" in env_vars or "VLLM_LOGGING_LEVEL" in os.environ  # verl's defaults merged in
    assert "WANDB_API_KEY" not in env_vars and "HF_TOKEN" not in env_vars
    printed = capsys.readouterr().out
    assert "ray init kwargs" in printed and "secret-" not in printed  # verl prints ray.init's arguments
    assert _FakeActorClass.calls == [({}, ({"WANDB_API_KEY": "secret-wandb", "HF_TOKEN": "secret-hf"},))]


def test_secrets_runner_keeps_options_run_ppo_adds():
    _FakeActorClass.calls = []
    runner = cluster.SecretsRunner(_FakeActorClass(), {"WANDB_API_KEY": "k"})
    runner.options(runtime_env={"nsight": {}}).remote()
    assert _FakeActorClass.calls == [({"runtime_env": {"nsight": {}}}, ({"WANDB_API_KEY": "k"},))]


def test_the_task_runner_takes_the_secrets_into_its_environment(monkeypatch):
    from real_runs.verl.runner import _GDROTaskRunner

    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    _GDROTaskRunner({"WANDB_API_KEY": "k"})
    assert os.environ["WANDB_API_KEY"] == "k"
    _GDROTaskRunner()  # verl's run_ppo and the CPU launcher create it without arguments


def _script(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / "scripts" / "ray_cluster.sh"), *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, **env})


def test_ray_cluster_script_is_valid_bash_and_answers_usage_errors_with_exit_2():
    assert subprocess.run(["bash", "-n", str(ROOT / "scripts" / "ray_cluster.sh")]).returncode == 0
    result = _script()
    assert result.returncode == 2 and "scripts/ray_cluster.sh head" in result.stderr
    result = _script("worker")
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "ray_cluster: worker needs the head's address, e.g. scripts/ray_cluster.sh worker 10.0.0.1:6379"]
    result = _script("check")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1


def test_ray_cluster_script_composes_the_ray_start_commands(tmp_path):
    """The exact `ray` lines (a fake `ray` records them; test_cluster_ray.py runs the real one)."""
    fake, calls = tmp_path / "ray", tmp_path / "calls.txt"
    fake.write_text(f'#!/usr/bin/env bash\necho "ray $* (auth $RAY_AUTH_MODE)" | tee -a {calls}\n')
    fake.chmod(0o755)
    home = tmp_path / "home"  # no ~/.ray/auth_token yet
    home.mkdir()
    head = _script("head", "--num-gpus=8", RAY=str(fake), HOME=str(home))
    assert head.returncode == 0
    lines = head.stdout.strip().splitlines()
    assert lines[0].startswith("ray_cluster: starting the head on port 6379; then, on every other node: "
                               "scripts/ray_cluster.sh worker ")
    assert lines[1].startswith("ray_cluster: token authentication is on: every node needs this node's token")
    assert calls.read_text().splitlines() == ["ray get-auth-token --generate (auth token)",
                                              "ray start --head --port=6379 --num-gpus=8 (auth token)"]
    calls.unlink()
    (home / ".ray").mkdir()
    (home / ".ray" / "auth_token").write_text("t" * 32)  # a token exists: none generated
    assert _script("head", RAY=str(fake), RAY_PORT="7000", HOME=str(home)).stdout.strip().splitlines()[-1] == \
        "ray start --head --port=7000 (auth token)"
    assert calls.read_text().splitlines() == ["ray start --head --port=7000 (auth token)"]
    assert _script("worker", "10.0.0.1:6379", RAY=str(fake), HOME=str(home)).stdout.strip() == \
        "ray start --address=10.0.0.1:6379 (auth token)"
    assert _script("stop", RAY=str(fake)).stdout.strip() == "ray stop (auth token)"
    assert _script("status", RAY=str(fake)).stdout.strip() == "ray status (auth token)"


def test_a_worker_without_the_heads_token_is_stopped_in_one_line(tmp_path):
    fake = tmp_path / "ray"
    fake.write_text('#!/usr/bin/env bash\necho "ray $*"\n')
    fake.chmod(0o755)
    env = {"RAY": str(fake), "HOME": str(tmp_path), "RAY_AUTH_TOKEN": ""}
    result = _script("worker", "10.0.0.1:6379", **env)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "ray_cluster: no Ray auth token on this node: export RAY_AUTH_TOKEN=<the output of `ray get-auth-token` "
        "on the head> (or share ~/.ray/auth_token), or set RAY_AUTH_MODE=disabled on every node"]
    assert _script("worker", "10.0.0.1:6379", **{**env, "RAY_AUTH_TOKEN": "abc"}).stdout.strip() == \
        "ray start --address=10.0.0.1:6379"
    assert _script("worker", "10.0.0.1:6379", **env, RAY_AUTH_MODE="disabled").returncode == 0


def test_multi_node_script_joins_a_running_cluster_and_says_what_must_be_shared():
    text = (ROOT / "real_runs" / "verl" / "configs" / "multi_node.sh").read_text()
    assert "export RAY_ADDRESS=${RAY_ADDRESS:-auto}" in text  # no cluster: ray.init fails, no one-node run
    for command in ("scripts/ray_cluster.sh head", "scripts/ray_cluster.sh worker <head-ip>:6379",
                    'scripts/ray_cluster.sh check "$CKPT" "$RUN_DIR"'):
        assert command in text
    assert "storage the head node keeps" not in text and "shared filesystem mounted at the same path" in text


def test_cluster_cli_without_a_cluster_exits_2_in_one_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_TMPDIR": str(tmp_path), "RAY_ADDRESS": "auto"}
    result = subprocess.run([sys.executable, "-m", "real_runs.verl.cluster", "check", str(tmp_path / "ckpt")],
                            cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: no Ray cluster at auto") and last.endswith("scripts/ray_cluster.sh head")
