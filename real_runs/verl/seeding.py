"""One sampling seed per rollout request, so ``rollout.full_determinism=true`` is safe with vLLM.

verl 0.9.1's vLLM server, under ``actor_rollout_ref.rollout.full_determinism=true``, seeds every
request it serves alike: ``sampling_params.setdefault("seed", replica_rank + rollout.seed)``
(``workers/rollout/vllm_rollout/vllm_async_server.py``), and its agent loop sends no seed of its
own. The rollouts of a group are the same prompt drawn with the same seed, so on one replica they
come out identical and every GRPO advantage is 0 (with several replicas, rows are routed by a hash
of their request id and rows that share a replica are still identical). verl has no per-request
seed option.

:class:`SeededAgentLoopManager` (verl's ``AgentLoopManager`` with one override: its workers are
:class:`SeededAgentLoopWorker`) puts a seed of its own into every request's sampling params, which
the server's ``setdefault`` then keeps. Select it with
``+actor_rollout_ref.rollout.agent.agent_loop_manager_class=real_runs.verl.seeding.SeededAgentLoopManager``
(verl's own option). The seed, :func:`request_seed`, is a function of (rollout.seed, training or
validation, global step, the row's position in the step's batch): distinct for every row of a step,
new at every step, and the same when the run is repeated or resumed, so full determinism keeps its
purpose. :func:`real_runs.verl.runner.check_launch_config` refuses full determinism with the vLLM
rollout without it.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import ray
from verl.experimental.agent_loop.agent_loop import AgentLoopManager, AgentLoopWorker

from real_runs.verl import VerlPluginError

MANAGER = "real_runs.verl.seeding.SeededAgentLoopManager"
ROW_BITS = 24  # rows per step below 2**24; the seed stays below 2**56


def request_seed(base: int, step: int, validate: bool, row: int) -> int:
    """The sampling seed of row ``row`` of a step's generation batch.

    seed = crc32("base:phase:step") * 2**24 + row: rows of one step never share a seed, the high
    bits change with the step (and between training and validation), nothing depends on the
    process or the clock.
    """
    if not 0 <= row < 2**ROW_BITS:
        raise VerlPluginError(f"row {row} of a generation batch is outside [0, 2**{ROW_BITS}): a batch that "
                              "large cannot be seeded per row; lower data.train_batch_size x rollout.n")
    phase = "val" if validate else "train"
    return zlib.crc32(f"{int(base)}:{phase}:{int(step)}".encode()) * 2**ROW_BITS + int(row)


class SeededAgentLoopWorker(AgentLoopWorker):
    """verl's agent-loop worker that adds ``seed`` = :func:`request_seed` to each row's sampling params.

    The row is verl's ``priority`` (``np.arange`` over the step's batch, assigned by the manager
    before the batch is split among workers, so unique across workers); a seed the sampling params
    already carry is kept.
    """

    async def generate_sequences(self, batch: Any) -> Any:
        priority = batch.non_tensor_batch.get("priority")
        if priority is None or len(np.unique(priority)) != len(batch):
            raise VerlPluginError("the generation batch has no per-row 'priority' (or repeats one), so rows would "
                                  "share a sampling seed: drop any 'priority' column from the data set")
        return await super().generate_sequences(batch)

    async def _run_agent_loop(self, sampling_params: dict[str, Any], trajectory: dict[str, Any], *,
                              agent_name: str, trace: bool = True, **kwargs: Any) -> Any:
        params = dict(sampling_params)
        params.setdefault("seed", request_seed(self.rollout_config.seed, trajectory["step"],
                                               bool(trajectory["validate"]), int(kwargs["priority"])))
        return await super()._run_agent_loop(params, trajectory, agent_name=agent_name, trace=trace, **kwargs)


class SeededAgentLoopManager(AgentLoopManager):
    """verl's ``AgentLoopManager`` whose workers are :class:`SeededAgentLoopWorker` (one seed per request)."""

    agent_loop_workers_class = ray.remote(SeededAgentLoopWorker)
