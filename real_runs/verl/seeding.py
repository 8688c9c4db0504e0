"""One sampling seed per rollout request, so ``rollout.full_determinism=true`` is safe with vLLM.

Under full determinism verl 0.9.1's vLLM server seeds every request alike (every GRPO advantage 0).
:class:`SeededAgentLoopManager` puts :func:`request_seed` (distinct per row and step, the same on a
resume) into every request. How to select it, and why: docs/verl-notes.md#real_runs-verl-seeding.
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
