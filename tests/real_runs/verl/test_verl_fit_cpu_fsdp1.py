"""verl 0.9.1's real ``fit()`` with GDRORayPPOTrainer on CPU through FSDP1, as the launch scripts run it.

The launch scripts keep verl's default ``strategy=fsdp`` (FSDP1), Prompt-GDRO's with parameter and
optimizer offload; the other CPU fits run FSDP2. Gap 6 of :mod:`real_runs.verl.cpu` (FSDP1's
``sync_module_states`` check and verl's ``cpu:<id>`` device string) is checked on its own without
Ray, then one launch of ``python -m real_runs.verl.cpu --strategy fsdp`` (2 ranks over gloo, the
``hf_cpu`` rollout, the smoke's setup, offload on, 2 steps, a checkpoint at step 2) is audited like
test_verl_fit_cpu.py's (whose launch and checks it reuses). About 1-2 min of CPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs these)")
import torch  # noqa: E402
from test_verl_fit_cpu import _audits, _launch, _tracker, _verl_grpo  # noqa: E402

from real_runs.verl import cpu, smoke  # noqa: E402
from real_runs.verl.trainer import GDRO_TIMING  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
STEPS = 2
FSDP1 = ["--strategy", "fsdp", f"trainer.total_training_steps={STEPS}", f"trainer.save_freq={STEPS}",
         "actor_rollout_ref.actor.fsdp_config.param_offload=true",
         "actor_rollout_ref.actor.fsdp_config.optimizer_offload=true",  # as paper_prompt_gdro.sh
         "trainer.logger=[console,file]", "actor_rollout_ref.rollout.full_determinism=true"]
FSDP1_MARK = "FSDP.set_state_dict_type"  # torch's deprecation warning, raised only where verl builds FSDP1 modules


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_gap_6_fsdp1_syncs_and_loads_cpu_modules_over_gloo_and_leaves_fsdp2_alone():
    code = """
import os, torch, torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import _init_utils
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29641")
dist.init_process_group("cpu:gloo", rank=0, world_size=1)
def wrap():
    return FSDP(torch.nn.Linear(3, 2), device_id="cpu", sync_module_states=True, use_orig_params=True)
try:
    wrap()
    raise SystemExit("torch's FSDP1 accepted CPU modules with sync_module_states: gap 6 is gone, drop it")
except ValueError as err:
    assert "requires them to be on GPU" in str(err), err
from real_runs.verl import cpu
cpu.install(); cpu.install()  # idempotent
module = wrap()
from verl.utils import fsdp_utils
import verl.workers.engine.fsdp.transformer_impl as engine
assert engine.load_fsdp_model_to_gpu is fsdp_utils.load_fsdp_model_to_gpu
fsdp_utils.offload_fsdp_model_to_cpu(module)
fsdp_utils.load_fsdp_model_to_gpu(module)  # verl's FSDP1 branch: torch.device(f"cpu:{device_id}")
assert fsdp_utils.get_device_id() == "cpu" and all(p.device.type == "cpu" for p in module.parameters())
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
module2 = fully_shard(torch.nn.Linear(3, 2), mesh=init_device_mesh("cpu", (1,)))  # FSDP2: model.to(device_id)
fsdp_utils.load_fsdp_model_to_gpu(module2)
assert fsdp_utils.fsdp_version(module2) == 2 and all(p.device.type == "cpu" for p in module2.parameters())
try:
    dist.destroy_process_group()
    _init_utils._check_module_states_for_sync_module_states([torch.zeros(1)])  # no gloo group: torch's check
    raise SystemExit("the check was skipped without a gloo process group")
except ValueError:
    pass
print("ok")
"""
    assert _python(code) == "ok"


@pytest.fixture(scope="module")
def fsdp1_fit(tmp_path_factory):
    out = tmp_path_factory.mktemp("verl_fit_fsdp1")
    smoke.prepare(out)
    job = _launch(out, "fsdp1", FSDP1)
    assert job["rc"] == 0, f"the FSDP1 fit failed:\n{job['log'][-3000:]}"
    return {"out": out, "log": job["log"]}


@pytest.mark.slow
def test_the_fsdp1_fit_runs_with_offload_and_saves_a_checkpoint(fsdp1_fit):
    out = fsdp1_fit["out"]
    assert FSDP1_MARK in fsdp1_fit["log"]  # verl built FSDP1 modules (FSDP2 never calls it)
    assert sorted(_audits(out, "fsdp1")) == [1, 2]
    folder = out / "ckpt" / f"global_step_{STEPS}"
    assert (folder / "gdro_ctrl.json").is_file() and any((folder / "actor").glob("model_world_size_2_rank_*.pt"))
    logged = [json.loads(line)["step"] for line in (out / "run" / "steps.jsonl").read_text().splitlines()]
    assert logged == [1, 2]


def test_fsdp1_overrides_compose(tmp_path):
    config = cpu.compose([*cpu.cpu_overrides(2, "fsdp"), *smoke.overrides(tmp_path, STEPS, ranks=2)])
    actor = config.actor_rollout_ref.actor
    assert (actor.strategy, actor.fsdp_config.strategy, config.actor_rollout_ref.ref.fsdp_config.strategy) == \
        ("fsdp", "fsdp", "fsdp")
    with pytest.raises(Exception, match="use fsdp .FSDP1. or fsdp2"):
        cpu.cpu_overrides(2, "fsdp3")


@pytest.mark.slow
def test_fsdp1_steps_execute_the_plan_and_scale_verls_advantages(fsdp1_fit):
    for step, audit in _audits(fsdp1_fit["out"], "fsdp1").items():
        plan = dict(zip(audit["plan_ids"].tolist(), audit["plan_counts"].tolist()))
        executed: dict[str, int] = {}
        for pid in audit["ids"].tolist():
            executed[pid] = executed.get(pid, 0) + 1
        assert executed == plan and sum(plan.values()) == smoke.BATCH * smoke.N_BAR, step
        verl_advantages = torch.as_tensor(audit["verl_advantages"])
        torch.testing.assert_close(verl_advantages, _verl_grpo(audit), rtol=1e-5, atol=1e-6)
        mask = audit["response_mask"].astype(bool)
        scaled, base = audit["advantages"][mask], audit["verl_advantages"][mask]
        rows = np.repeat(np.arange(len(mask)), mask.sum(1))
        uids = audit["uids"][rows]
        for uid in set(uids.tolist()):  # one positive multiplier per prompt group
            ratio = scaled[(uids == uid) & (base != 0)] / base[(uids == uid) & (base != 0)]
            assert ratio.size == 0 or (np.ptp(ratio) < 1e-5 and ratio[0] > 0), (step, uid)


@pytest.mark.slow
def test_the_plugins_seconds_are_logged_beside_verls_step_timer(fsdp1_fit):
    tracker = _tracker(fsdp1_fit["out"], "fsdp1")
    assert sorted(tracker) == [1, 2]
    for data in tracker.values():
        assert np.isfinite(data[GDRO_TIMING]) and data[GDRO_TIMING] > 0 and "timing_s/step" in data
