"""Full determinism without identical rollouts: verl 0.9.1's vLLM behaviour (read from its source),
the launch refusing it, the per-request seeds of :mod:`real_runs.verl.seeding`, and the ``hf_cpu``
server drawing a group of one prompt with them (identical under one shared seed, as vLLM's
default is, distinct with the plugin's seeds or hf_cpu's own per-request ones). The whole path
through verl's fit() is in test_determinism_fit_cpu.py."""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs these)")
from verl_helpers import compose_config  # noqa: E402

from real_runs.verl import VerlPluginError, seeding  # noqa: E402
from real_runs.verl.runner import check_launch_config, determinism_problem  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
VLLM_FD = ["actor_rollout_ref.rollout.n=4", "actor_rollout_ref.rollout.name=vllm",
           "actor_rollout_ref.rollout.full_determinism=true"]
SEEDED = f"+actor_rollout_ref.rollout.agent.agent_loop_manager_class={seeding.MANAGER}"


def _source(module: str) -> str:
    """A verl module's text, without importing it or its package (vllm_rollout imports vllm)."""
    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.origin
    return (Path(spec.origin).parent.joinpath(*module.split(".")[1:])).with_suffix(".py").read_text()


def test_verls_vllm_server_seeds_every_request_of_a_replica_alike():
    """The guard's premise, in verl 0.9.1's code (vllm is not installed here, so read, not imported)."""
    server = _source("verl.workers.rollout.vllm_rollout.vllm_async_server")
    assert re.search(r"if self\.config\.full_determinism:\s*\n\s*sampling_params\.setdefault\(\"seed\", "
                     r"self\.replica_rank \+ self\.config\.seed\)", server)
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    build = inspect.getsource(AgentLoopWorker.generate_sequences)
    params = build[build.index("sampling_params = dict("):build.index("def apply_greedy_sampling_params")]
    assert "seed" not in params  # the agent loop sends no seed of its own: the server's setdefault wins


@pytest.mark.parametrize("extra", [[], ["+actor_rollout_ref.rollout.agent.agent_loop_manager_class="
                                        "verl.experimental.agent_loop.AgentLoopManager"]])
def test_full_determinism_with_vllm_is_refused_in_one_line(extra):
    with pytest.raises(VerlPluginError) as err:
        check_launch_config(compose_config([*VLLM_FD, *extra]))
    message = str(err.value)
    assert "\n" not in message and "every GRPO advantage is 0" in message
    assert SEEDED.lstrip("+") in message and "full_determinism=false" in message


def test_a_manager_that_cannot_be_loaded_is_named():
    problem = determinism_problem(compose_config([*VLLM_FD, "+actor_rollout_ref.rollout.agent."
                                                  "agent_loop_manager_class=no_such_module.Manager"]))
    assert problem and problem.startswith("actor_rollout_ref.rollout.agent.agent_loop_manager_class="
                                          "no_such_module.Manager cannot be loaded (ImportError")


class MySeededManager(seeding.SeededAgentLoopManager):
    """A user's subclass keeps the per-request seeds."""


@pytest.mark.parametrize("overrides", [
    [*VLLM_FD, SEEDED],  # the accepted vLLM combination
    [*VLLM_FD, f"+actor_rollout_ref.rollout.agent.agent_loop_manager_class={__name__}.MySeededManager"],
    ["actor_rollout_ref.rollout.n=4", "actor_rollout_ref.rollout.name=vllm"],  # no full determinism
    ["actor_rollout_ref.rollout.n=4", "actor_rollout_ref.rollout.name=hf_cpu",  # the CPU rollout
     "actor_rollout_ref.rollout.full_determinism=true"],
    ["actor_rollout_ref.rollout.n=4", "actor_rollout_ref.rollout.name=sglang",  # SGLang gets no seed at all
     "actor_rollout_ref.rollout.full_determinism=true"],
])
def test_accepted_combinations(overrides):
    assert determinism_problem(compose_config(overrides)) is None


def test_the_launcher_refuses_before_ray_starts_with_exit_2(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_TMPDIR": str(tmp_path), "OMP_NUM_THREADS": "1"}
    ray_tmp = tmp_path / "ray"
    env = {**env, "RAY_TMPDIR": str(ray_tmp)}
    result = subprocess.run([sys.executable, "-m", "real_runs.verl.main", *VLLM_FD, "trainer.device=cpu",
                             f"hydra.run.dir={tmp_path / 'hydra'}"],
                            cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: actor_rollout_ref.rollout.full_determinism=true with the vLLM rollout")
    assert "ray init kwargs" not in result.stdout and not ray_tmp.exists()  # Ray never started


def test_request_seeds_differ_within_a_step_and_between_steps_and_repeat_exactly():
    rows = 4096  # 512 prompts x 8 rollouts
    step_1 = [seeding.request_seed(42, 1, False, r) for r in range(rows)]
    assert len(set(step_1)) == rows and max(step_1) < 2**63
    assert step_1 == [seeding.request_seed(42, 1, False, r) for r in range(rows)]  # a rerun or resume
    assert not set(step_1) & {seeding.request_seed(42, 2, False, r) for r in range(rows)}
    assert not set(step_1) & {seeding.request_seed(42, 1, True, r) for r in range(rows)}  # validation
    assert not set(step_1) & {seeding.request_seed(43, 1, False, r) for r in range(rows)}  # rollout.seed
    with pytest.raises(VerlPluginError, match="outside"):
        seeding.request_seed(42, 1, False, 2**24)


def _bare_worker(seed: int = 42) -> seeding.SeededAgentLoopWorker:
    worker = object.__new__(seeding.SeededAgentLoopWorker)
    worker.rollout_config = SimpleNamespace(seed=seed)
    return worker


def test_the_worker_adds_each_rows_seed_and_keeps_a_given_one(monkeypatch):
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    sent = []

    async def verls_run(self, sampling_params, trajectory, *, agent_name, trace=True, **kwargs):
        sent.append(sampling_params)
        return kwargs["priority"]

    monkeypatch.setattr(AgentLoopWorker, "_run_agent_loop", verls_run)
    worker, params = _bare_worker(), {"temperature": 1.0, "top_p": 1.0}
    trajectory = {"step": 7, "sample_index": 3, "rollout_n": 0, "validate": False}
    for row in range(4):
        asyncio.run(worker._run_agent_loop(params, trajectory, agent_name="single_turn_agent", priority=np.int64(row)))
    assert [p["seed"] for p in sent] == [seeding.request_seed(42, 7, False, r) for r in range(4)]
    assert "seed" not in params  # the worker's shared dict is not changed
    asyncio.run(worker._run_agent_loop({**params, "seed": 5}, trajectory, agent_name="a", priority=0))
    assert sent[-1]["seed"] == 5


def test_the_worker_refuses_a_batch_whose_rows_would_share_a_seed():
    from verl import DataProto

    batch = DataProto.from_single_dict({"priority": np.array([0, 0, 1, 1], dtype=object),
                                        "raw_prompt": np.array(["a"] * 4, dtype=object)})
    with pytest.raises(VerlPluginError, match="repeats one"):
        asyncio.run(_bare_worker().generate_sequences(batch))


def test_the_manager_runs_seeded_workers():
    config = compose_config([*VLLM_FD, SEEDED])
    manager = seeding.SeededAgentLoopManager(config, llm_client=None)  # verl's __init__ keeps our class
    assert manager.agent_loop_workers_class.__ray_metadata__.class_name == "SeededAgentLoopWorker"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from omegaconf import OmegaConf

    from real_runs.verl import cpu_rollout, smoke

    model_dir = smoke.prepare(tmp_path_factory.mktemp("determinism"))
    config = OmegaConf.create({"seed": 42, "response_length": 8})
    return cpu_rollout.HFCPUServer(config, OmegaConf.create({"path": str(model_dir)}), 0)


def _group(server, seeds, request_ids):
    """One prompt drawn len(seeds) times (a GRPO group), each with its request id and seed (None: none)."""
    prompt = [5, 9, 13, 21, 3]
    outs = []
    for seed, request_id in zip(seeds, request_ids):
        params = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": True}
        if seed is not None:
            params["seed"] = seed
        outs.append(tuple(asyncio.run(server.generate(prompt, params, request_id)).token_ids))
    return outs


def test_a_group_under_vllms_shared_seed_is_identical(server):
    """What verl's vLLM server does under full determinism: seed = replica_rank + rollout.seed for all."""
    shared = 0 + 42
    rollouts = _group(server, [shared] * 4, [f"det-{row}" for row in range(4)])
    assert len(set(rollouts)) == 1  # four copies of one response: every GRPO advantage would be 0


def test_a_group_under_the_plugins_seeds_differs(server):
    rollouts = _group(server, [seeding.request_seed(42, 1, False, row) for row in range(4)],
                      [f"det-{row}" for row in range(4)])
    assert len(set(rollouts)) == 4
    again = _group(server, [seeding.request_seed(42, 1, False, row) for row in range(4)],
                   [f"det-{row}" for row in range(4)])
    assert again == rollouts  # still fully deterministic


def test_a_group_under_hf_cpus_own_full_determinism_differs(server):
    """The CPU rollout with full_determinism and no seed in the request (verl's single-turn agent loop)."""
    rollouts = _group(server, [None] * 4, [f"det-{row}" for row in range(4)])
    assert len(set(rollouts)) == 4
    assert _group(server, [None] * 4, [f"det-{row}" for row in range(4)]) == rollouts
