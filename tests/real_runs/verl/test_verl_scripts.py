"""The GPU scripts' shell logic on a machine without a GPU: valid bash, one-line exits with the
documented codes, results under $OUT (the stages themselves need a GPU, verl and vLLM)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("script", ["verl_smoke.sh", "gpu_check.sh"])
def test_scripts_are_valid_bash(script):
    assert subprocess.run(["bash", "-n", str(ROOT / "scripts" / script)]).returncode == 0


def test_smoke_finds_the_documented_verl_environment(tmp_path):
    """docs/install.md makes .venv-verl-gpu: the smoke takes it (before CI's .venv-verl) when VERL_PY is unset.
    A scratch copy of the script beside stand-in venvs whose python says which one ran."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "scripts" / "verl_smoke.sh").write_text((ROOT / "scripts" / "verl_smoke.sh").read_text())
    for venv in (".venv-verl-gpu", ".venv-verl"):
        python = repo / venv / "bin" / "python"
        python.parent.mkdir(parents=True)
        python.write_text(f'#!/usr/bin/env bash\ncat > /dev/null\necho "stand-in {venv}"\nexit 1\n')
        python.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "VERL_PY"}
    result = subprocess.run(["bash", str(repo / "scripts" / "verl_smoke.sh")], capture_output=True, text=True,
                            timeout=120, env={**env, "OUT": str(tmp_path / "out"), "DEVICE": "cpu"})
    assert result.returncode == 3  # the stand-in lacks verl: a missing prerequisite, said in one line
    assert result.stdout.strip().splitlines()[-1] == "verl smoke: stand-in .venv-verl-gpu"


def test_smoke_without_an_interpreter_exits_3_with_one_line(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path / "out"), "VERL_PY": str(tmp_path / "no_python")}
    result = subprocess.run(["bash", str(ROOT / "scripts" / "verl_smoke.sh")], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 3
    assert result.stdout.strip().splitlines()[-1].startswith("verl smoke: no interpreter with verl")


def test_gpu_check_without_a_gpu_stops_after_env_and_writes_the_summary(tmp_path):
    pytest.importorskip("torch")
    if __import__("torch").cuda.is_available():
        pytest.skip("a GPU is present: run scripts/gpu_check.sh itself")
    # the env stage imports torch: its limit (30 s on a GPU machine) raised, so a loaded machine cannot turn
    # "failed" (no CUDA) into "timeout"
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable, "ENV_TIMEOUT": "240", "WINDOW_S": "900"}
    result = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 2 and "no usable GPU" in result.stdout
    summary = (tmp_path / "summary.md").read_text()
    assert "| env | failed: gpu_check: CUDA is not available" in summary and (tmp_path / "env.txt").exists()


def _fake_smoke_run(out: Path, rollouts_G, multiplier_G, steps=5, resumed_from=3):
    """A run directory, trackers and checkpoints shaped like a smoke run's, with given per-bin plans."""
    import json

    from gdro_lab.runformat.runlog import RunWriter
    from real_runs.verl.state import save_controller_state

    with RunWriter(out / "run", {}, 3, "verl") as writer:
        for step in range(1, steps + 1):
            writer.log_step(step, {"total_rollouts": 24.0, "mean_success": 0.5},
                            {"rollouts": rollouts_G, "multiplier": multiplier_G})
    for name, span in (("tracker_first.jsonl", range(1, resumed_from + 1)),
                       ("tracker_resumed.jsonl", range(resumed_from + 1, steps + 1))):
        (out / name).write_text("".join(json.dumps({"step": s, "data": {"gdro/total_rollouts": 24.0,
                                                                          "rollout_alloc/mean_n": 4.0}}) + "\n"
                                        for s in span))
    for step in (resumed_from, steps):
        save_controller_state(out / "ckpt" / f"global_step_{step}", step,
                              {"classifier": {}, "weighter": {}, "allocator": {}})


@pytest.mark.parametrize("rollouts, multipliers, message", [
    ([4.0, 4.0, 4.0], [1.5, 1.0, 0.8], "Rollout-GDRO never acted"),
    ([2.0, 4.0, 6.0], [1.0, 1.0, 1.0], "advantages equal verl's unscaled ones"),
    ([2.0, 4.0, 6.0], [1.5, 1.0, 0.8], None),
])
def test_smoke_verify_tells_gdro_from_grpo(tmp_path, rollouts, multipliers, message):
    from real_runs.verl import smoke

    _fake_smoke_run(tmp_path, rollouts, multipliers)
    if message is None:
        assert smoke.verify(tmp_path, 5, 3)["ragged_steps"] == [1, 2, 3, 4, 5]
    else:
        with pytest.raises(AssertionError, match=message):
            smoke.verify(tmp_path, 5, 3)
