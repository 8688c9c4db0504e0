"""``GDRORayPPOTrainer``: verl's PPO trainer with the GDRO controllers, by narrow overrides.

verl 0.9.1's ``RayPPOTrainer.fit`` is left as it is; ``_get_gen_batch``, ``_validate``, ``_update_actor``
and ``_save_checkpoint`` / ``_load_checkpoint`` are extended. Requires GRPO advantages, no critic
warm-up, a policy loss linear in the advantage (:data:`LINEAR_LOSS_MODES`), the legacy trainer, no prefix grouper.
Departs from the paper's code (a patch of verl): no verl file is changed, controller state is
checkpointed, the difficulty signal is the unbiased pass@k. Each override and requirement:
docs/verl-notes.md#real_runs-verl-trainer.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo.ray_trainer import RayPPOTrainer

from gdro_lab import ConfigError
from gdro_lab.controllers.registry import REGISTRY
from real_runs.verl import VerlPluginError
from real_runs.verl import batch as vb
from real_runs.verl.controller import GDROController, GDROSettings
from real_runs.verl.state import CTRL_FILE, load_controller_state, save_controller_state, step_folder

SUPPORTED_ESTIMATORS = ("grpo", "grpo_vectorized")
# verl 0.9.1 policy losses whose per-sequence loss is positively homogeneous in that sequence's
# advantages (loss(m A) = m loss(A) for m > 0), so scaling A by Prompt-GDRO's multiplier is weighting
# the prompt's loss by it (bypass_mode: its IS weights and rejection mask do not depend on advantages).
# clip_cov / kl_cov pick tokens by the covariance of log-prob and advantage over the batch, dro adds an
# advantage-free penalty: rejected, as is any loss this list does not name
# (tests/real_runs/verl/test_loss_parity.py derives the list from verl's own losses).
LINEAR_LOSS_MODES = ("vanilla", "dppo_tv", "dppo_kl", "gspo", "sapo", "gpg", "geo_mean", "cispo", "bypass_mode")


#: ``gdro`` settings the trainer applies itself (not the controllers'): the advantage clip.
TRAINER_SETTINGS = ("adv_clip",)

#: The tracker key of the plugin's own seconds per training step (its hooks, not verl's work).
GDRO_TIMING = "timing_s/gdro"


def settings_from_config(config: Any) -> GDROSettings:
    """The ``gdro`` section of a verl config as :class:`GDROSettings` (defaults when absent), less
    :data:`TRAINER_SETTINGS`."""
    section = config.get("gdro") if hasattr(config, "get") else None
    values = OmegaConf.to_container(section, resolve=True) if section is not None else {}
    assert isinstance(values, dict)
    return GDROSettings.from_mapping({k: v for k, v in values.items() if k not in TRAINER_SETTINGS})


def adv_clip_from_config(config: Any) -> float | None:
    """``gdro.adv_clip``: the bound C of the advantage clip [-C, C] (None = no clip); one-line error when bad."""
    value = OmegaConf.select(config, "gdro.adv_clip", default=None)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise VerlPluginError(f"gdro.adv_clip={value!r} is invalid: use a number > 0 (the paper's 5.0) "
                              "or null for no clip")
    return float(value)


def check_verl_config(config: Any) -> None:
    """One-line errors for verl settings the plugin cannot run with."""
    estimator = str(config.algorithm.adv_estimator)
    if estimator not in SUPPORTED_ESTIMATORS:
        raise VerlPluginError(f"algorithm.adv_estimator={estimator} is not supported by the GDRO plugin: "
                              f"use one of {', '.join(SUPPORTED_ESTIMATORS)}")
    if config.actor_rollout_ref.actor.get("use_prefix_grouper", False):
        raise VerlPluginError("actor_rollout_ref.actor.use_prefix_grouper=true balances whole uid groups with "
                              "equal counts per rank, which ragged Rollout-GDRO groups break: set it to false")
    selector = REGISTRY["selector"].get(settings_from_config(config).method_spec().selector)
    batch_size = int(config.data.train_batch_size)
    if getattr(selector, "screens", False) and int(config.data.get("gen_batch_size", None) or batch_size) <= batch_size:
        raise VerlPluginError(f"gdro.selector={settings_from_config(config).method_spec().selector} skips prompts before rollout and takes the next "
                              "ones of the dataloader's batch: set data.gen_batch_size above data.train_batch_size="
                              f"{batch_size} (e.g. +data.gen_batch_size={int(1.5 * batch_size)})")
    adv_clip_from_config(config)
    if int(config.trainer.get("critic_warmup", 0)) != 0:
        raise VerlPluginError("trainer.critic_warmup must be 0 with the GDRO plugin (GRPO has no critic; "
                              "the controllers update in the actor step)")
    loss_mode = str(OmegaConf.select(config, "actor_rollout_ref.actor.policy_loss.loss_mode", default="vanilla"))
    if loss_mode not in LINEAR_LOSS_MODES and settings_from_config(config).method_spec().weighter != "uniform":
        raise VerlPluginError(f"actor_rollout_ref.actor.policy_loss.loss_mode={loss_mode} is not linear in the "
                              "advantage (scaling a prompt's advantages by m does not scale its loss by m), so "
                              "Prompt-GDRO's multipliers would not weight prompts: use one of "
                              f"{', '.join(LINEAR_LOSS_MODES)}, or gdro.weighter=uniform")


def controller_from_config(config: Any) -> GDROController:
    """Build the run's controller from a verl config with a ``gdro`` section (one-line errors)."""
    check_verl_config(config)
    n_bar = int(config.actor_rollout_ref.rollout.n)
    run_config = {"gdro": OmegaConf.to_container(config.get("gdro", OmegaConf.create({})), resolve=True),
                  "verl": {"rollout_n": n_bar, "train_batch_size": int(config.data.train_batch_size),
                           "adv_estimator": str(config.algorithm.adv_estimator)}}
    try:
        return GDROController(settings_from_config(config), n_bar, run_config,
                              batch_size=int(config.data.train_batch_size))
    except ConfigError as err:
        hint = (f" (n_bar is actor_rollout_ref.rollout.n={n_bar}: change rollout.n or gdro.allocator_config)"
                if "n_bar" in str(err) else "")
        raise VerlPluginError(f"gdro settings do not fit this launch: {err}{hint}") from None


class GDRORayPPOTrainer(RayPPOTrainer):
    """verl's ``RayPPOTrainer`` plus difficulty bins, Prompt-GDRO and Rollout-GDRO."""

    _gdro_seconds: float = 0.0  # the plugin's own seconds in this step so far (timing_s/gdro)

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.gdro = controller_from_config(self.config)
        self._gdro_validating = False

    def _validate(self, *args: Any, **kwargs: Any) -> Any:
        self._gdro_validating = True
        try:
            return super()._validate(*args, **kwargs)
        finally:
            self._gdro_validating = False

    def _get_gen_batch(self, batch: DataProto) -> DataProto:
        gen_batch = super()._get_gen_batch(batch)
        if self._gdro_validating:
            return gen_batch
        start = time.perf_counter()
        counts_P = self.gdro.plan(vb.prompt_ids(batch, self.gdro.settings.id_key))
        n_bar = int(self.config.actor_rollout_ref.rollout.n)
        for data in (batch, gen_batch):
            vb.install_planned_repeat(data, counts_P, n_bar)
            data.repeat = self._timed(data.repeat)  # verl expands both later, before _update_actor
        self._gdro_seconds += time.perf_counter() - start
        return gen_batch

    def _timed(self, function: Any) -> Any:
        """``function``, its seconds added to this step's ``timing_s/gdro``."""
        def call(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self._gdro_seconds += time.perf_counter() - start
        return call

    def _update_actor(self, batch: DataProto) -> DataProto:
        start = time.perf_counter()
        bound = adv_clip_from_config(self.config)
        clipped = vb.clip_advantages(batch, bound) if bound is not None else None
        metrics = self.gdro.observe(batch, step=int(self.global_steps))
        if clipped is not None:
            metrics["gdro/adv_clip_frac"] = clipped
        with self.gdro.trained_rows_only(batch):  # a prompt selector's dropped groups: out of the loss
            verl_start = time.perf_counter()
            output = super()._update_actor(batch)
            verl_seconds = time.perf_counter() - verl_start
        # the plugin's own seconds this step: plan, the planned expansions, observe (run directory
        # included), the clip and the mask; beside verl's timing_s/step in the tracker
        metrics[GDRO_TIMING] = self._gdro_seconds + time.perf_counter() - start - verl_seconds
        self._gdro_seconds = 0.0
        output.meta_info.setdefault("metrics", {}).update(metrics)
        return output

    def _save_checkpoint(self) -> None:
        folder = step_folder(self.config.trainer.default_local_dir, self.global_steps)
        save_controller_state(folder, int(self.global_steps), self.gdro.state_dict())
        self.gdro.snapshot(int(self.global_steps))
        super()._save_checkpoint()

    def _load_checkpoint(self) -> Any:
        result = super()._load_checkpoint()
        step = int(self.global_steps)
        if step > 0:
            trainer_cfg = self.config.trainer
            folder = (trainer_cfg.resume_from_path if trainer_cfg.resume_mode == "resume_path"
                      else step_folder(trainer_cfg.default_local_dir, step))
            restore_controllers(self.gdro, folder, step)
        self.gdro.open_run(resume_step=step if step > 0 else None)
        return result


def restore_controllers(controller: GDROController, folder: Any, step: int) -> bool:
    """Load ``folder/gdro_ctrl.json`` into ``controller``; returns whether state was restored.

    A checkpoint without the file is an error unless ``gdro.resume_without_state`` is set.
    """
    if controller.settings.resume_without_state and not (Path(folder) / CTRL_FILE).exists():
        return False
    saved_step, state = load_controller_state(folder)
    if saved_step != step:
        raise VerlPluginError(f"{folder}/gdro_ctrl.json is for step {saved_step}, the checkpoint for step "
                              f"{step}: the folder was mixed up; resume from an intact global_step_N")
    controller.load_state_dict(state)
    return True
