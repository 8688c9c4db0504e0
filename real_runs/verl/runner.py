"""What a launch of the verl plugin runs: the pre-launch checks and verl's task runner building the GDRO trainer.

:func:`check_launch_config` refuses, before Ray starts, what the plugin cannot run (one line each);
:data:`GDROTaskRunner` is verl's legacy task runner with :class:`real_runs.verl.trainer.GDRORayPPOTrainer`,
as a Ray actor. Detail: docs/verl-notes.md#real_runs-verl-runner.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

import ray
from omegaconf import OmegaConf
from verl.trainer.main_ppo_v0 import BaseTaskRunner

from real_runs.verl import VerlPluginError


class _GDROTaskRunner(BaseTaskRunner):
    """verl's legacy TaskRunner flow (workers, datasets, sampler) building GDRORayPPOTrainer.

    ``secrets_env`` (W&B / Hugging Face tokens from the launching shell) goes into this process's
    environment: the trainer here is what logs to W&B.
    """

    def __init__(self, secrets_env: Mapping[str, str] | None = None):
        super().__init__()
        os.environ.update(secrets_env or {})

    def run(self, config: Any) -> None:
        from verl.trainer.ppo.utils import create_rl_dataset, create_rl_sampler, need_critic, need_reference_policy
        from verl.utils.config import omega_conf_to_dataclass, validate_config
        from verl.utils.dataset.rl_dataset import collate_fn
        from verl.workers.config import HFModelConfig

        from real_runs.verl.cluster import check_cluster

        OmegaConf.resolve(config)
        print(check_cluster(config), flush=True)  # before any worker starts
        _, ray_worker_group_cls = self.add_actor_rollout_worker(config)
        self.add_critic_worker(config)
        self.add_reward_model_resource_pool(config)
        self.add_teacher_model_resource_pool(config)
        validate_config(config=config, use_reference_policy=need_reference_policy(config),
                        use_critic=need_critic(config))
        model_config: HFModelConfig = omega_conf_to_dataclass(config.actor_rollout_ref.model)
        tokenizer, processor = model_config.tokenizer, model_config.processor
        resource_pool_manager = self.init_resource_pool_mgr(config)
        datasets = [create_rl_dataset(config.data[files], config.data, tokenizer, processor, is_train=train,
                                      max_samples=config.data.get(limit, -1))
                    for files, train, limit in (("train_files", True, "train_max_samples"),
                                                ("val_files", False, "val_max_samples"))]
        trainer = self.trainer_class()(
            config=config, tokenizer=tokenizer, processor=processor,
            role_worker_mapping=self.role_worker_mapping, resource_pool_manager=resource_pool_manager,
            ray_worker_group_cls=ray_worker_group_cls, train_dataset=datasets[0], val_dataset=datasets[1],
            collate_fn=collate_fn, train_sampler=create_rl_sampler(config.data, datasets[0]))
        trainer.init_workers()
        status = "failed"
        try:
            trainer.fit()
            status = "finished"
        finally:
            trainer.gdro.close(status)

    def trainer_class(self) -> type:
        """The trainer to build (the CPU launcher swaps in an audited subclass)."""
        from real_runs.verl.trainer import GDRORayPPOTrainer

        return GDRORayPPOTrainer


GDROTaskRunner = ray.remote(_GDROTaskRunner)


def check_launch_config(config: Any) -> None:
    """One-line errors for a launch the plugin cannot run, before Ray starts.

    Checks the controllers against ``rollout.n``, the checkpoint to resume, the run directory
    (:func:`run_dir_problem`) and full determinism (:func:`determinism_problem`).
    """
    from pathlib import Path

    from real_runs.verl.controller import run_dir_problem
    from real_runs.verl.state import CTRL_FILE, check_unlocked, resume_folder
    from real_runs.verl.trainer import controller_from_config

    if config.trainer.get("use_v1", False):
        raise VerlPluginError("trainer.use_v1=true selects verl's V1 (TransferQueue) trainer, which the GDRO "
                              "plugin does not extend: set trainer.use_v1=false")
    problem = determinism_problem(config)
    if problem:
        raise VerlPluginError(problem)
    settings = controller_from_config(config).settings
    folder = resume_folder(config.trainer)
    if folder is not None and not (folder / CTRL_FILE).exists() and not settings.resume_without_state:
        raise VerlPluginError(f"verl will resume {folder}, which has no {CTRL_FILE} (not written by the GDRO "
                              "plugin): resume from a GDRO checkpoint, or set gdro.resume_without_state=true")
    if settings.run_dir:
        path = Path(settings.run_dir)
        check_unlocked(path)
        problem = run_dir_problem(path, resume_step=1 if folder is not None else None)
        if problem:
            raise VerlPluginError(problem)


def determinism_problem(config: Any) -> str | None:
    """Why this launch's full determinism would make a group's rollouts identical; None if it would not.

    With vLLM, refused unless the agent loop manager is a :class:`real_runs.verl.seeding.SeededAgentLoopManager`
    (why: docs/verl-notes.md#real_runs-verl-seeding).
    """
    def setting(key: str) -> Any:
        return OmegaConf.select(config, f"actor_rollout_ref.rollout.{key}", default=None, throw_on_missing=False)

    if not setting("full_determinism") or setting("name") != "vllm":
        return None
    manager = setting("agent.agent_loop_manager_class")
    if manager:
        from verl.utils.import_utils import load_class_from_fqn

        from real_runs.verl.seeding import SeededAgentLoopManager

        try:
            manager_class = load_class_from_fqn(manager, "AgentLoopManager")
        except (ImportError, AttributeError, ValueError) as err:
            return (f"actor_rollout_ref.rollout.agent.agent_loop_manager_class={manager} cannot be loaded "
                    f"({type(err).__name__}: {err}): give the class's full module path")
        if isinstance(manager_class, type) and issubclass(manager_class, SeededAgentLoopManager):
            return None
    from real_runs.verl.seeding import MANAGER

    return ("actor_rollout_ref.rollout.full_determinism=true with the vLLM rollout gives every request of a replica "
            "the same sampling seed (rollout.seed + replica rank), so the rollouts of a group come out identical "
            f"and every GRPO advantage is 0: add +actor_rollout_ref.rollout.agent.agent_loop_manager_class={MANAGER} "
            "(one seed per request, still reproducible) or set actor_rollout_ref.rollout.full_determinism=false")
