"""Checks `gdro train` makes before anything heavy loads, and the plan of ``--dry-run``.

:func:`check` (one call, in seconds, before the model and the data load): :func:`check_device`,
:func:`check_output` (never write into a folder that is not ours) and the logging sinks; ``--dry-run``
(:mod:`real_runs.dryrun`) adds the model source and the data and prints the plan. The order of a
start: docs/train-notes.md#real_runs-dryrun.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gdro_lab.runformat.runlog import LOCK_FILE, RunLock, is_run_dir
from real_runs.config import TrainConfig
from real_runs.sinks import check_sinks


class TrainError(ValueError):
    """A run cannot start or resume; the message is one line naming the problem and the fix."""


def run_dir_of(cfg: TrainConfig) -> Path:
    """``train.out / (train.run_name or {method}-{model}-s{seed})``."""
    name = cfg.train.run_name or f"{cfg.method.name}-{Path(cfg.model.name).name}-s{cfg.train.seed}"
    return Path(cfg.train.out) / name


def check_output(cfg: TrainConfig) -> Path:
    """The new run's directory, checked before anything loads; nothing is created here.

    Refused: a path through a file, an existing run (resume it instead), a folder that exists and
    holds anything (gdro train writes only into new or empty folders), an unwritable parent.
    """
    run_dir = run_dir_of(cfg)
    existing = next(p for p in (run_dir, *run_dir.parents) if p.exists() or p == Path(p.anchor))
    if not existing.is_dir():
        raise TrainError(f"train.out={cfg.train.out}: {existing} is a file, not a folder: pass a folder to --out")
    if run_dir.is_dir():
        if is_run_dir(run_dir):
            raise TrainError(f"{run_dir} already holds a run: choose another --out or train.run_name, or continue "
                             f"it with gdro train --resume {run_dir} (nothing was overwritten)")
        if any(run_dir.iterdir()):
            raise TrainError(f"{run_dir} exists and is not a gdro run: gdro train writes only into new or empty "
                             "folders; choose another --out or train.run_name (nothing was touched)")
    if not os.access(existing, os.W_OK):
        raise TrainError(f"train.out={cfg.train.out}: {existing} is not writable: choose another --out")
    return run_dir


def claim_run_dir(run_dir: Path) -> RunLock:
    """Create the run directory and take its writer lock; re-checked under the lock, so two
    processes starting the same run cannot both write it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = RunLock(run_dir).acquire()
    if is_run_dir(run_dir) or any(p.name != LOCK_FILE for p in run_dir.iterdir()):
        lock.release()
        raise TrainError(f"{run_dir} was filled by another process while this one started: choose another "
                         "--out or train.run_name (nothing was overwritten)")
    return lock


def check(cfg: TrainConfig) -> Path:
    """Every check of a new run, before the model and the data load: the device, the output folder
    (:func:`check_output`, whose run directory is returned; nothing is created) and the logging sinks."""
    check_device(cfg)
    run_dir = check_output(cfg)
    check_sinks(cfg.log.tensorboard, cfg.log.wandb)
    return run_dir


def resolve_device(setting: str) -> Any:
    """The trainer's ``torch.device`` for ``model.device``: ``cuda`` as asked, ``auto`` -> cuda when a CUDA
    device is present, else (``cpu``, or ``auto`` without CUDA) the CPU. Decided here, beside the check,
    so that the device is settled before the model loads (``train_setup.build`` asks for it)."""
    import torch
    use_cuda = setting == "cuda" or (setting == "auto" and torch.cuda.is_available())
    return torch.device("cuda" if use_cuda else "cpu")


def check_device(cfg: TrainConfig) -> None:
    """``model.device=cuda`` on a machine without CUDA is refused naming the config key."""
    import torch
    if cfg.model.device == "cuda" and not torch.cuda.is_available():
        raise TrainError("model.device=cuda but CUDA is not available here: set model.device=cpu "
                         "(or auto, which takes the GPU when there is one)")


def model_shape(name: str) -> tuple[Any, str]:
    """(memory.Shape, where it came from) of a model without loading weights, or (None, why)."""
    from real_runs import memory
    from real_runs.models import TINY_MODELS, TINY_SHAPES, checkpoint_folder, hub_cache_hit
    if name in TINY_MODELS:
        vocab = 151669 if name == "tiny-qwen" else 1024
        base = dict(hidden_size=64, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=16, tie_word_embeddings=True, vocab_size=vocab)
        return memory.Shape.of({**base, **TINY_SHAPES.get(name, {})}), "built here"
    folder = checkpoint_folder(Path(name).expanduser())
    try:
        if (folder / "config.json").exists() or hub_cache_hit(name):
            from transformers import AutoConfig
            source = str(folder) if folder.exists() else name
            config = AutoConfig.from_pretrained(source, local_files_only=True)
            return memory.Shape.of(getattr(config, "text_config", config)), "its config.json"
    except (OSError, ValueError, TypeError):
        pass
    if name in memory.QWEN3_SHAPES:
        return memory.Shape.of(memory.QWEN3_SHAPES[name]), "the known Qwen3 shape"
    return None, "unknown (no local config.json)"
