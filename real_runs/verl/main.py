"""Launcher: ``python -m real_runs.verl.main [hydra overrides]`` (verl's ``main_ppo`` with GDRO).

The config is ``real_runs/verl/configs/gdro_trainer.yaml``: verl's ``ppo_trainer`` defaults plus a
``gdro`` section (``gdro.*=...``). :func:`real_runs.verl.runner.check_launch_config` refuses what the
plugin cannot run before Ray starts; what runs lives in :mod:`real_runs.verl.runner`. Detail:
docs/verl-notes.md#real_runs-verl-main.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import hydra

from real_runs.verl import VerlPluginError
from real_runs.verl.runner import GDROTaskRunner, check_launch_config


def _fail(err: BaseException) -> None:
    """Exit with code 2 and the error's one line (the original error of a Ray task error)."""
    print(f"error: {getattr(err, 'cause', None) or err}", file=sys.stderr)
    sys.exit(2)


@hydra.main(config_path="configs", config_name="gdro_trainer", version_base=None)
def main(config: Any) -> None:
    """Validate the config, pass the environment to Ray, run verl's PPO driver with the GDRO task runner."""
    from verl.trainer.main_ppo import run_ppo
    from verl.utils.device import auto_set_device

    from real_runs.verl.cluster import SecretsRunner, add_runtime_env, task_runner_secrets

    auto_set_device(config)
    try:
        check_launch_config(config)
    except (VerlPluginError, ValueError) as err:
        _fail(err)
    add_runtime_env(config, os.environ)
    try:
        run_ppo(config, task_runner_class=SecretsRunner(GDROTaskRunner, task_runner_secrets(os.environ)))
    except VerlPluginError as err:  # raised in the task runner: Ray's task error is also a VerlPluginError
        _fail(err)


if __name__ == "__main__":
    main()
