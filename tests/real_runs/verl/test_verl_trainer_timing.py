"""``timing_s/gdro``: the plugin's own seconds per step, logged beside verl's ``timing_s/step``.

A fake clock stands in for ``time.perf_counter`` in real_runs.verl.trainer and moves only when one
part of the step runs, each part by its own power of ten, so the logged figure says exactly which
parts it counted: the plan, the planned expansion of both batches and observe (the plugin's), not
verl's actor update nor anything verl does between the hooks. No timing of the machine is involved.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs these)")
from test_verl_trainer import fit_step, make_trainer  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.ppo import ray_trainer  # noqa: E402

from real_runs.verl import batch as vb  # noqa: E402
from real_runs.verl import trainer as trainer_module  # noqa: E402
from real_runs.verl.trainer import GDRO_TIMING  # noqa: E402

PLAN, EXPAND, OBSERVE, VERL_UPDATE, VERL_OTHER = 1.0, 10.0, 100.0, 1000.0, 10000.0


@pytest.fixture
def clock(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(trainer_module, "time", SimpleNamespace(perf_counter=lambda: now[0]))

    def advancing(function, seconds):
        def call(*args, **kwargs):
            result = function(*args, **kwargs)
            now[0] += seconds
            return result
        return call

    def fake_update_actor(self, batch):
        now[0] += VERL_UPDATE
        return DataProto.from_single_dict(data={}, meta_info={"metrics": {"actor/pg_loss": 0.5}})

    monkeypatch.setattr(ray_trainer.RayPPOTrainer, "_update_actor", fake_update_actor)
    monkeypatch.setattr(vb, "expand", advancing(vb.expand, EXPAND))
    monkeypatch.setattr(ray_trainer, "compute_advantage", advancing(ray_trainer.compute_advantage, VERL_OTHER))
    return advancing


def test_timing_counts_plan_expansions_and_observe_only(tmp_path, clock):
    trainer = make_trainer(tmp_path, ["+gdro.allocator_config.eta=20.0"])
    trainer.gdro.plan = clock(trainer.gdro.plan, PLAN)
    trainer.gdro.observe = clock(trainer.gdro.observe, OBSERVE)
    for step in (1, 2, 3):  # per step, not summed over the run
        _, _, out = fit_step(trainer, step)
        assert out.meta_info["metrics"][GDRO_TIMING] == PLAN + 2 * EXPAND + OBSERVE, step


def test_validation_is_not_counted(tmp_path, clock):
    trainer = make_trainer(tmp_path)
    trainer.gdro.plan = clock(trainer.gdro.plan, PLAN)
    trainer.gdro.observe = clock(trainer.gdro.observe, OBSERVE)
    trainer._gdro_validating = True
    from verl_helpers import prompt_batch

    trainer._get_gen_batch(prompt_batch(["toy:val:0", "toy:val:1"])).repeat(4, interleave=True)
    trainer._gdro_validating = False
    _, _, out = fit_step(trainer, 1)
    assert out.meta_info["metrics"][GDRO_TIMING] == PLAN + 2 * EXPAND + OBSERVE


def test_the_documented_overhead_benchmark_command_parses():
    """docs/measurements.md's command for the in-launch overhead, with too few steps: it parses and stops at once."""
    import os
    import shlex
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    doc = (root / "docs" / "measurements.md").read_text()
    command = next(line for line in doc.splitlines() if "bench_verl_overhead.py" in line and line.startswith("OMP_"))
    words = shlex.split(command)
    assert words[:3] == ["OMP_NUM_THREADS=1", ".venv-verl/bin/python", "benchmarks/bench_verl_overhead.py"]
    result = subprocess.run([sys.executable, *words[2:], "--steps", "2"], cwd=root, capture_output=True, text=True,
                            timeout=300, env={**os.environ, "PYTHONPATH": str(root)})
    assert result.returncode == 1 and result.stderr.strip().splitlines()[-1] == (
        "--steps 2 is too few: steps 2..N are measured, use 3 or more")
