"""verl 0.9.1 on CPU, for tests and laptops: ``python -m real_runs.verl.cpu [--audit DIR] [overrides]``.

NOT for GPU runs: nothing here is imported by the plugin. verl's files are never changed; six gaps
between verl 0.9.1 (FSDP1 or FSDP2) and a CPU-only machine are closed at run time in our own
processes. ``--strategy fsdp`` runs FSDP1 (as the launch scripts), the default FSDP2; ``--audit DIR``
writes one ``step_N.npz`` per step for tests; other arguments are hydra overrides, as for
``real_runs.verl.main``. The six gaps: docs/verl-notes.md#real_runs-verl-cpu.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import signal
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Sequence

import numpy as np
import torch

PLATFORM = "gdro_cpu"
ROLLOUT = "hf_cpu"
MODULE = "real_runs.verl.cpu"  # not __name__: under `python -m` that is "__main__", which workers cannot import
_INSTALLED = False


# ---------------------------------------------------------------------- 1. the platform


def _cpu_device_module() -> SimpleNamespace:
    """What verl calls on ``get_torch_device()`` (torch.cuda's names), answered for the CPU."""
    none = lambda *args, **kwargs: None  # noqa: E731
    zero = lambda *args, **kwargs: 0  # noqa: E731
    return SimpleNamespace(
        is_available=lambda: True, device_count=lambda: 1, current_device=lambda: "cpu", set_device=none,
        synchronize=none, empty_cache=none, ipc_collect=none, set_per_process_memory_fraction=none,
        memory_allocated=zero, memory_reserved=zero, max_memory_allocated=zero, max_memory_reserved=zero,
        reset_peak_memory_stats=none, mem_get_info=lambda *a, **k: (0, 0), get_device_name=lambda *a: "cpu",
        manual_seed=torch.manual_seed, manual_seed_all=torch.manual_seed,
        get_rng_state=lambda *a, **k: torch.get_rng_state(), set_rng_state=lambda state, *a, **k: torch.set_rng_state(state),
        current_stream=torch.cpu.current_stream, stream=torch.cpu.stream, Stream=torch.cpu.Stream,
        Event=torch.cpu.Event)


def _platform_class() -> type:
    from verl.plugin.platform.platform_base import PlatformBase

    class PlatformGDROCPU(PlatformBase):
        """verl platform for CPU-only tests: device ``cpu``, ``gloo``, Ray's logical ``GPU`` slots."""

        device_name = "cpu"
        vendor_name = "cpu"

        @property
        def device_module(self) -> Any:
            return _cpu_device_module()

        def is_available(self) -> bool:
            return True

        def current_device(self) -> Any:  # verl passes it as a device; torch reads an int as an accelerator
            return "cpu"

        def device_count(self) -> int:
            return 1

        def set_device(self, device_index: int) -> None:
            return None

        def synchronize(self, device_index: int | None = None) -> None:
            return None

        def manual_seed(self, seed: int) -> None:
            torch.manual_seed(seed)

        def manual_seed_all(self, seed: int) -> None:
            torch.manual_seed(seed)

        def set_allocator_settings(self, settings: str) -> None:
            return None

        def empty_cache(self) -> None:
            return None

        def get_device_capability(self, device_index: int = 0) -> tuple[None, None]:
            return None, None

        def communication_backend_name(self) -> str:
            return "gloo"

        def visible_devices_envvar(self) -> str:
            return "CUDA_VISIBLE_DEVICES"

        def nvtx_range(self, msg: str) -> Any:
            return contextlib.nullcontext()

        def profiler_start(self) -> None:
            return None

        def profiler_stop(self) -> None:
            return None

        def ray_resource_name(self) -> str:
            return "GPU"  # logical slots given to ray.init(num_gpus=...); torch sees no GPU

        def ray_noset_envvars(self) -> list[str]:
            return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

        def is_ipc_supported(self) -> bool:
            return False

        def cudart(self) -> None:
            return None

    return PlatformGDROCPU


# ---------------------------------------------------------------------- install (every process)


def install() -> None:
    """Close verl 0.9.1's CPU gaps in this process (idempotent; Ray runs it in every worker)."""
    global _INSTALLED
    if _INSTALLED:
        return
    os.environ["VERL_PLATFORM"] = PLATFORM
    from verl.plugin.platform import platform_manager

    platform_class = _platform_class()
    platform_manager.PlatformRegistry.register(PLATFORM)(platform_class)
    if platform_manager._current_platform is not None:  # verl already picked one in this process
        platform_manager.set_platform(platform_class())

    from verl.workers.engine.base import EngineRegistry
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

    registered = EngineRegistry._engines.get("language_model", {})
    if "cpu" not in registered.get("fsdp", {}):
        EngineRegistry.register(model_type="language_model", backend=["fsdp", "fsdp2"],
                                device="cpu")(FSDPEngineWithLMHead)

    import verl.utils.distributed as verl_distributed
    import verl.workers.engine_workers as engine_workers

    original = verl_distributed.initialize_global_process_group_ray

    @functools.wraps(original)
    def init_gloo(timeout_second: Any = None, backend: Any = None) -> None:
        original(timeout_second=timeout_second, backend=backend or "cpu:gloo")

    verl_distributed.initialize_global_process_group_ray = init_gloo
    engine_workers.initialize_global_process_group_ray = init_gloo

    from verl.workers.rollout import base as rollout_base
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    from real_runs.verl import cpu_rollout

    rollout_base._ROLLOUT_REGISTRY[(ROLLOUT, "async")] = "real_runs.verl.cpu_rollout.HFCPUServerAdapter"
    RolloutReplicaRegistry.register(ROLLOUT, lambda: cpu_rollout.HFCPUReplica)
    _allow_fsdp1_cpu_sync()
    _INSTALLED = True


def _allow_fsdp1_cpu_sync() -> None:
    """Gap 6: FSDP1's ``sync_module_states=True`` (verl always sets it) refuses CPU tensors.

    torch's check (``torch/distributed/fsdp/_init_utils.py``, ``_check_module_states_for_sync_module_states``)
    exists for NCCL, which broadcasts GPU tensors only; gloo broadcasts CPU tensors. The check is
    skipped only when the default process group's backend is gloo alone, so it still guards any
    other backend.
    """
    import torch.distributed as dist
    from torch.distributed.fsdp import _init_utils

    original = getattr(_init_utils, "_check_module_states_for_sync_module_states_original",
                       _init_utils._check_module_states_for_sync_module_states)

    def check(module_states: list[torch.Tensor]) -> None:
        if dist.is_initialized() and {part.rpartition(":")[2] for part in str(dist.get_backend()).split(",")} == {"gloo"}:
            return  # gloo broadcasts the CPU tensors that follow
        original(module_states)

    setattr(_init_utils, "_check_module_states_for_sync_module_states_original", original)
    _init_utils._check_module_states_for_sync_module_states = check

    import verl.utils.fsdp_utils as fsdp_utils
    import verl.workers.engine.fsdp.transformer_impl as fsdp_engine

    load = getattr(fsdp_utils, "_gdro_cpu_original_load", fsdp_utils.load_fsdp_model_to_gpu)

    @functools.wraps(load)
    def load_to_cpu_index(model: Any) -> None:
        """verl's FSDP1 branch builds ``f"{device_name}:{device_id}"``: ``cpu:cpu`` here; ``cpu:0`` is valid.
        FSDP2's branch calls ``model.to(device_id)``, where ``0`` would be an accelerator: left as it is."""
        if fsdp_utils.fsdp_version(model) != 1:
            load(model)
            return
        device_id = fsdp_utils.get_device_id
        fsdp_utils.get_device_id = lambda: 0
        try:
            load(model)
        finally:
            fsdp_utils.get_device_id = device_id

    setattr(fsdp_utils, "_gdro_cpu_original_load", load)
    fsdp_utils.load_fsdp_model_to_gpu = load_to_cpu_index
    fsdp_engine.load_fsdp_model_to_gpu = load_to_cpu_index


def worker_setup() -> None:
    """Ray ``worker_process_setup_hook``: :func:`install` in each Ray worker before its first task."""
    install()


# ---------------------------------------------------------------------- the audited trainer


def audited_trainer_class() -> type:
    """:class:`GDRORayPPOTrainer` that saves ``step_N.npz`` per training step into ``audit_dir``.

    With ``kill_after_step`` = N > 0 the trainer process SIGKILLs itself right after step N is
    logged (no ``finally``, no checkpoint of step N): a job dying mid-run, for resume tests.
    """
    from real_runs.verl import batch as vb
    from real_runs.verl.trainer import GDRORayPPOTrainer

    class AuditedGDROTrainer(GDRORayPPOTrainer):
        audit_dir: str = ""
        kill_after_step: int = 0

        def _update_actor(self, batch: Any) -> Any:
            verl_advantages = batch.batch["advantages"].clone()
            plan = dict(self.gdro.last_plan)
            output = super()._update_actor(batch)
            step = int(self.global_steps)
            target = Path(self.audit_dir) / f"step_{step}.npz"
            target.parent.mkdir(parents=True, exist_ok=True)
            ids = vb.prompt_ids(batch, self.gdro.settings.id_key)
            np.savez(target, step=step, ids=np.array(ids), uids=np.array(batch.non_tensor_batch["uid"], dtype=str),
                     scores=vb.sequence_scores(batch), response_mask=batch.batch["response_mask"].numpy(),
                     verl_advantages=verl_advantages.numpy(), advantages=batch.batch["advantages"].numpy(),
                     plan_ids=np.array(list(plan), dtype=str), plan_counts=np.array(list(plan.values())),
                     responses=batch.batch["responses"].numpy())
            if step == self.kill_after_step:
                print(f"audit: killing the trainer after step {step}", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            return output

    return AuditedGDROTrainer


# ---------------------------------------------------------------------- launch


_FP32 = "{param_dtype:fp32,reduce_dtype:fp32,buffer_dtype:fp32}"  # no bf16 autocast on CPU


STRATEGIES = ("fsdp", "fsdp2")


def cpu_overrides(world_size: int = 2, strategy: str = "fsdp2") -> list[str]:
    """Hydra overrides that fit verl's PPO loop to ``world_size`` FSDP ranks on CPU (gaps 4 and 5).

    ``strategy`` FSDP1 (``fsdp``, verl's default and the launch scripts') or FSDP2 (``fsdp2``) in
    fp32 without autocast, SDPA attention without the packed (flash-attn) path, the ``hf_cpu``
    rollout as one replica over all ranks (one server process), one agent-loop and one reward
    worker, no dataloader workers. They come before the caller's overrides, which win.
    """
    if strategy not in STRATEGIES:
        from real_runs.verl import VerlPluginError

        raise VerlPluginError(f"strategy {strategy!r} is unknown: use fsdp (FSDP1) or fsdp2")
    return [
        f"trainer.n_gpus_per_node={world_size}", "trainer.nnodes=1", "trainer.device=cpu",
        f"actor_rollout_ref.rollout.name={ROLLOUT}",
        f"actor_rollout_ref.rollout.tensor_model_parallel_size={world_size}",  # one replica: one server process
        "actor_rollout_ref.rollout.agent.num_workers=1", "reward.num_workers=1",
        "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
        "actor_rollout_ref.model.use_remove_padding=false",
        f"actor_rollout_ref.actor.strategy={strategy}", f"actor_rollout_ref.actor.fsdp_config.strategy={strategy}",
        f"actor_rollout_ref.ref.fsdp_config.strategy={strategy}",
        "actor_rollout_ref.actor.fsdp_config.model_dtype=fp32", "actor_rollout_ref.ref.fsdp_config.model_dtype=fp32",
        f"+actor_rollout_ref.actor.fsdp_config.mixed_precision={_FP32}",
        f"+actor_rollout_ref.ref.fsdp_config.mixed_precision={_FP32}",
        "actor_rollout_ref.actor.fsdp_config.use_torch_compile=false",
        "actor_rollout_ref.ref.fsdp_config.use_torch_compile=false",
        "actor_rollout_ref.model.enable_gradient_checkpointing=false",
        "data.dataloader_num_workers=0",
    ]


def ray_init(world_size: int = 2, num_cpus: int = 16, object_store_mb: int = 200) -> None:
    """Start a local Ray with ``world_size`` logical GPU slots and every worker set up for the CPU.

    ``num_cpus`` is Ray's logical count (verl's placement groups reserve 3 per rank), not a thread
    budget; each process still runs torch with ``OMP_NUM_THREADS`` (default 1).
    """
    import ray

    if ray.is_initialized():
        return
    root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    env = {"VERL_PLATFORM": PLATFORM, "PYTHONPATH": path, "TOKENIZERS_PARALLELISM": "false",
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "RAY_DEDUP_LOGS": "0",
           **{k: os.environ[k] for k in ("VERL_FILE_LOGGER_PATH",) if k in os.environ}}
    os.environ.update({k: v for k, v in env.items() if k != "PYTHONPATH"})
    ray.init(num_cpus=num_cpus, num_gpus=world_size, include_dashboard=False, log_to_driver=True,
             object_store_memory=object_store_mb * 2**20,
             runtime_env={"env_vars": env, "worker_process_setup_hook": f"{MODULE}.worker_setup"})


def compose(overrides: Sequence[str]) -> Any:
    """The plugin's config (``configs/gdro_trainer.yaml``) with the given overrides."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(Path(__file__).parent / "configs"), version_base=None):
        return hydra_compose("gdro_trainer", overrides=list(overrides))


def run(overrides: Sequence[str], audit_dir: str | None = None, world_size: int = 2,
        kill_after_step: int = 0, strategy: str = "fsdp2") -> None:
    """Run verl's ``fit`` with the GDRO trainer on CPU (after :func:`cpu_overrides`)."""
    install()  # before verl's modules ask for the platform
    import ray
    from verl.trainer.main_ppo import run_ppo

    from real_runs.verl.runner import _GDROTaskRunner, check_launch_config

    config = compose([*cpu_overrides(world_size, strategy), *overrides])
    check_launch_config(config)
    ray_init(world_size)

    class _CPUTaskRunner(_GDROTaskRunner):
        def trainer_class(self) -> type:
            if not audit_dir:
                return super().trainer_class()
            cls: Any = audited_trainer_class()
            cls.audit_dir, cls.kill_after_step = audit_dir, kill_after_step
            return cls

    run_ppo(config, task_runner_class=ray.remote(num_cpus=1)(_CPUTaskRunner))


def main(argv: Sequence[str] | None = None) -> int:
    from real_runs.verl import VerlPluginError

    parser = argparse.ArgumentParser(prog="python -m real_runs.verl.cpu", description=__doc__.splitlines()[0])
    parser.add_argument("--audit", default=None, help="write step_N.npz audit files to this folder")
    parser.add_argument("--kill-after-step", type=int, default=0,
                        help="with --audit: SIGKILL the trainer right after this step (resume tests)")
    parser.add_argument("--ranks", type=int, default=2, help="FSDP ranks (CPU processes), default 2")
    parser.add_argument("--strategy", choices=STRATEGIES, default="fsdp2",
                        help="verl's FSDP version: fsdp (FSDP1, as the launch scripts) or fsdp2 (default)")
    args, overrides = parser.parse_known_args(argv)
    try:
        run(overrides, args.audit, args.ranks, args.kill_after_step, args.strategy)
    except VerlPluginError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    from real_runs.verl import cpu  # the importable module, so Ray pickles its classes by reference

    sys.exit(cpu.main())
