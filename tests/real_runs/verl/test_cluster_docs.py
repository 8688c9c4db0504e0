"""docs/verl-cluster.md as code: each command it gives is one this repository runs (the cluster
commands need several nodes, so they are composed and validated here, and run for real on one host by
test_cluster_ray.py), and its example error is the line the check prints."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs these)")
from verl_helpers import compose_config  # noqa: E402

from real_runs.verl import cluster, seeding  # noqa: E402
from real_runs.verl.runner import check_launch_config, determinism_problem  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
DOC = (ROOT / "docs" / "verl-cluster.md").read_text()
SUBCOMMANDS = {"head", "worker", "check", "status", "stop"}


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC, flags=re.S)


def _commands() -> list[str]:
    lines = [line for block in _blocks("bash") for line in block.replace("\\\n", " ").splitlines()]
    return [line.split("#")[0].strip() for line in lines if line.strip() and not line.startswith("#")]


def test_the_cluster_commands_are_the_scripts_subcommands():
    used = [shlex.split(c) for c in _commands() if c.startswith("scripts/ray_cluster.sh")]
    assert {words[1] for words in used} >= {"head", "worker", "check", "status"}
    assert all(words[1] in SUBCOMMANDS for words in used)
    worker = next(words for words in used if words[1] == "worker")
    assert worker[2] == "<head-ip>:6379"  # the head's default port (RAY_PORT)
    script = (ROOT / "scripts" / "ray_cluster.sh").read_text()
    assert "port=${RAY_PORT:-6379}" in script


def test_the_multi_node_launch_names_the_scripts_variables():
    launch = next(c for c in _commands() if "multi_node.sh" in c)
    assignments = dict(word.split("=", 1) for word in shlex.split(launch) if "=" in word and "/" not in word[:1])
    configs = ROOT / "real_runs" / "verl" / "configs"
    script = (configs / "multi_node.sh").read_text() + (configs / "paper_run.sh").read_text()
    for name in ("VERL_DATA", "CKPT", "RUN_DIR", "NNODES"):
        assert name in assignments and re.search(rf"\$\{{{name}[:}}]", script), name


def test_the_full_determinism_launch_is_accepted_and_without_the_manager_refused():
    launch = next(c for c in _commands() if "full_determinism" in c)
    overrides = [word for word in shlex.split(launch) if "=" in word]
    config = compose_config(["actor_rollout_ref.rollout.n=4", "actor_rollout_ref.rollout.name=vllm", *overrides])
    assert determinism_problem(config) is None
    check_launch_config(config)
    assert overrides[-1].endswith(seeding.MANAGER)
    without = compose_config(["actor_rollout_ref.rollout.n=4", "actor_rollout_ref.rollout.name=vllm",
                              *overrides[:-1]])
    assert determinism_problem(without)


def test_the_runtime_env_override_in_the_text_composes():
    override = re.search(r"`'(\+ray_kwargs\.ray_init\.runtime_env\.env_vars\.[^']+)'`", DOC).group(1)
    config = compose_config(["actor_rollout_ref.rollout.n=4", override])
    env = cluster.add_runtime_env(config, {"GDRO_RAY_ENV": "NCCL_IB_HCA", "NCCL_IB_HCA": "mlx5"}, code_root="/r")
    assert env["NCCL_SOCKET_IFNAME"] == "eth0" and env["NCCL_IB_HCA"] == "mlx5"


def test_the_example_error_is_the_checks_line():
    example = re.search(r"\n```\n(error: .*?)\n```", DOC).group(1)
    node = cluster.Node("feedface" + "0" * 48, "10.0.0.2 (gpu-2, node feedface)")
    line = cluster._not_shared("trainer.default_local_dir", "/scratch/ckpt", node, {"cwd": "/"}, "gpu-1")
    assert example == f"error: {line}"


def test_the_passed_variables_table_is_what_the_code_passes():
    row = next(line for line in DOC.splitlines() if line.startswith("| Hugging Face |"))
    assert re.findall(r"`(\w+)`", row) == list(cluster.PASSED_ENV)
    assert f"`{cluster.EXTRA_ENV}`" in DOC and all(f"`{p}*`" in DOC for p in cluster.PASSED_PREFIXES)


def test_the_overhead_command_parses(tmp_path):
    """The documented benchmark command with an unknown arm added: its options parse, it stops at once."""
    import os
    import subprocess
    import sys

    measurements = (ROOT / "docs" / "measurements.md").read_text()  # the benchmark moved there from the cluster page
    command = next(c for c in re.findall(r"```bash\n(.*?)```", measurements, flags=re.S) if "bench_verl_plugin.py" in c)
    words = shlex.split(command)
    assert words[0] == "OMP_NUM_THREADS=1" and words[2] == "benchmarks/bench_verl_plugin.py"
    result = subprocess.run([sys.executable, *words[2:], "--arms", "nope"], cwd=ROOT, capture_output=True,
                            text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 1 and result.stderr.strip().splitlines()[-1] == (
        "unknown arm 'nope': choose from verl, plugin-uniform, plugin-gdro")
