"""Checkpoints of a training run: everything a resumed run needs to continue exactly.

Layout inside the run directory::

    RUN_DIR/checkpoints/step_00000040/
        model.pt        the policy's state_dict
        optimizer.pt    AdamW state
        trainer.pt      scheduler, data-order position, step, RNG states (python, numpy, torch, CUDA)
        controllers.json  every controller's state_dict (gdro_lab.runlog.encode_state: exact, RNG included)

A checkpoint is written to ``.tmp-step_…`` and renamed when complete (atomic on POSIX), so a
process killed while saving leaves the previous checkpoint intact; stale temporaries are
removed at the next save. Only the newest ``keep_last`` checkpoints are kept.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from gdro_lab.runlog import decode_state, encode_state

CHECKPOINT_DIR = "checkpoints"


class CheckpointError(ValueError):
    """A checkpoint cannot be read; the message names the folder and the fix."""


def rng_state() -> dict[str, Any]:
    """States of every global RNG: python, numpy's legacy global, torch CPU and every CUDA device."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    """Restore the states saved by :func:`rng_state`."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def checkpoint_steps(run_dir: str | os.PathLike[str]) -> list[int]:
    """Steps of the complete checkpoints of a run, ascending."""
    folder = Path(run_dir) / CHECKPOINT_DIR
    if not folder.is_dir():
        return []
    return sorted(int(p.name[5:]) for p in folder.glob("step_*") if (p / "trainer.pt").exists())


def save_checkpoint(run_dir: str | os.PathLike[str], step: int, *, model: torch.nn.Module,
                    optimizer: torch.optim.Optimizer, scheduler: Any, controllers: Mapping[str, Any],
                    data_state: Mapping[str, Any], keep_last: int = 2) -> Path:
    """Write the checkpoint of ``step`` atomically and prune all but the newest ``keep_last``."""
    folder = Path(run_dir) / CHECKPOINT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob(".tmp-step_*"):
        shutil.rmtree(stale, ignore_errors=True)
    name = f"step_{int(step):08d}"
    tmp = folder / f".tmp-{name}"
    tmp.mkdir()
    torch.save(model.state_dict(), tmp / "model.pt")
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    states = {name_: c.state_dict() for name_, c in controllers.items()}
    with open(tmp / "controllers.json", "w", encoding="utf-8") as handle:
        json.dump(encode_state(states), handle)
    torch.save({"step": int(step), "scheduler": scheduler.state_dict(), "data": dict(data_state),
                "rng": rng_state()}, tmp / "trainer.pt")
    for file in tmp.iterdir():
        with open(file, "rb") as handle:
            os.fsync(handle.fileno())
    target = folder / name
    if target.exists():  # a re-run of the same step after a resume: replace it whole
        shutil.rmtree(target)
    os.replace(tmp, target)
    for old in checkpoint_steps(run_dir)[:-keep_last]:
        shutil.rmtree(folder / f"step_{old:08d}", ignore_errors=True)
    return target


def load_checkpoint(run_dir: str | os.PathLike[str], *, model: torch.nn.Module,
                    optimizer: torch.optim.Optimizer, scheduler: Any, controllers: Mapping[str, Any],
                    step: int | None = None) -> tuple[int, dict[str, Any]]:
    """Restore the newest (or the given) checkpoint into the objects; returns (step, data_state).

    The RNG states are restored last, so nothing run here consumes random numbers afterwards.
    """
    steps = checkpoint_steps(run_dir)
    if not steps:
        raise CheckpointError(f"{run_dir} has no complete checkpoint: start a new run instead of resuming")
    chosen = steps[-1] if step is None else int(step)
    path = Path(run_dir) / CHECKPOINT_DIR / f"step_{chosen:08d}"
    try:
        model.load_state_dict(torch.load(path / "model.pt", map_location="cpu", weights_only=True))
        optimizer.load_state_dict(torch.load(path / "optimizer.pt", map_location="cpu", weights_only=True))
        trainer = torch.load(path / "trainer.pt", map_location="cpu", weights_only=False)
        states = decode_state(json.loads((path / "controllers.json").read_text(encoding="utf-8")))
    except (OSError, RuntimeError, json.JSONDecodeError, KeyError) as err:
        raise CheckpointError(f"checkpoint {path} is unreadable ({err.__class__.__name__}): "
                              "delete it to resume from the one before") from None
    missing = sorted(set(controllers) - set(states))
    if missing:
        raise CheckpointError(f"checkpoint {path} has no state for {', '.join(missing)}: "
                              "it was written by a different method; resume with the run's own config")
    for name, controller in controllers.items():
        controller.load_state_dict(states[name])
    scheduler.load_state_dict(trainer["scheduler"])
    set_rng_state(trainer["rng"])
    return int(trainer["step"]), dict(trainer["data"])
