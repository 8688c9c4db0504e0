"""Checkpoints of a training run: everything a resumed run needs to continue exactly.

``RUN_DIR/checkpoints/step_XXXXXXXX/``: a Hugging Face folder (``save_pretrained``; ``model.pt`` for a
module that is not a ``PreTrainedModel``), ``optimizer.pt``, ``trainer.pt`` (scheduler, data position,
step, RNG states) and ``controllers.json``. Written to a temporary name and renamed (atomic); only the
newest ``keep_last`` are kept, and only the newest ``keep_optimizer_last`` keep ``optimizer.pt``.
Layout in full: docs/train-notes.md#real_runs-checkpoint and docs/run-format.md.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import torch

from gdro_lab.runformat.runlog import decode_state, encode_state, read_evals

CHECKPOINT_DIR = "checkpoints"
TRAINING_FILES = ("optimizer.pt", "trainer.pt", "controllers.json", "model.pt")
"""Files of a checkpoint that are not part of its Hugging Face folder."""


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


def best_evaluation(run_dir: str | os.PathLike[str], key: str, up_to: int) -> tuple[int, float] | None:
    """(step, value) of the largest ``key`` among the run's evaluations at steps <= ``up_to``
    (eval.jsonl; the first such step on ties), or None when there is none."""
    best: tuple[int, float] | None = None
    for record in read_evals(run_dir):
        value = record.get("metrics", {}).get(key)
        if value is not None and record["step"] <= up_to and (best is None or value > best[1]):
            best = (int(record["step"]), float(value))
    return best


def checkpoint_steps(run_dir: str | os.PathLike[str]) -> list[int]:
    """Steps of the complete checkpoints of a run, ascending (model-only ones included)."""
    folder = Path(run_dir) / CHECKPOINT_DIR
    if not folder.is_dir():
        return []
    return sorted(int(p.name[5:]) for p in folder.glob("step_*") if (p / "trainer.pt").exists())


def resumable_steps(run_dir: str | os.PathLike[str]) -> list[int]:
    """Steps of the checkpoints a run can resume from (those that still hold ``optimizer.pt``)."""
    folder = Path(run_dir) / CHECKPOINT_DIR
    return [s for s in checkpoint_steps(run_dir) if (folder / f"step_{s:08d}" / "optimizer.pt").exists()]


def step_folder(run_dir: str | os.PathLike[str], step: int) -> Path:
    return Path(run_dir) / CHECKPOINT_DIR / f"step_{int(step):08d}"


def _save_model(model: Any, tokenizer: Any, folder: Path) -> None:
    """A Hugging Face folder for a ``PreTrainedModel`` (safetensors, 5 GB shards), else model.pt.

    ``save_original_format=False`` (why: docs/train-notes.md#real_runs-checkpoint): a model whose keys
    transformers converts on load (some MoE models) is saved in transformers' layout, which transformers
    loads and vLLM may not."""
    if not hasattr(model, "save_pretrained") or getattr(model, "config", None) is None:
        torch.save(model.state_dict(), folder / "model.pt")
        return
    from transformers.utils import logging as hf_logging
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        use_cache = getattr(model.config, "use_cache", None)
        model.config.use_cache = True  # training may switch it off; an exported model generates
        model.save_pretrained(folder, max_shard_size="5GB", save_original_format=False)
        if use_cache is not None:
            model.config.use_cache = use_cache
        umask = os.umask(0)
        os.umask(umask)
        for weights in folder.glob("model*.safetensors"):  # save_pretrained leaves them 0600
            weights.chmod(0o666 & ~umask)
        if tokenizer is not None:
            tokenizer.save_pretrained(folder)
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def save_checkpoint(run_dir: str | os.PathLike[str], step: int, *, model: torch.nn.Module,
                    optimizer: torch.optim.Optimizer, scheduler: Any, controllers: Mapping[str, Any],
                    data_state: Mapping[str, Any], keep_last: int = 2, keep_optimizer_last: int = 0,
                    tokenizer: Any = None, keep_steps: Iterable[int] = ()) -> Path:
    """Write the checkpoint of ``step`` atomically, prune all but the newest ``keep_last`` and the
    steps in ``keep_steps`` (the best evaluation's), and drop ``optimizer.pt`` from all but the
    newest ``keep_optimizer_last`` (0 = keep it everywhere)."""
    folder = Path(run_dir) / CHECKPOINT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob(".tmp-step_*"):
        shutil.rmtree(stale, ignore_errors=True)
    name = f"step_{int(step):08d}"
    tmp = folder / f".tmp-{name}"
    tmp.mkdir()
    _save_model(model, tokenizer, tmp)
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
    kept = {int(s) for s in keep_steps}
    for old in checkpoint_steps(run_dir)[:-keep_last]:
        if old not in kept:
            shutil.rmtree(folder / f"step_{old:08d}", ignore_errors=True)
    if keep_optimizer_last:
        for old in checkpoint_steps(run_dir)[:-keep_optimizer_last]:
            (folder / f"step_{old:08d}" / "optimizer.pt").unlink(missing_ok=True)
    return target


def read_model_state(folder: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """The model tensors of a checkpoint (or any Hugging Face folder): safetensors (one file or
    shards with an index) or the older ``model.pt``. Tied weights appear once (under the name
    ``save_pretrained`` kept); :func:`restore_model` puts them into a module."""
    path = Path(folder)
    index = path / "model.safetensors.index.json"
    if index.exists():
        from safetensors.torch import load_file
        shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        state: dict[str, torch.Tensor] = {}
        for shard in shards:
            state.update(load_file(path / shard, device="cpu"))
        return state
    if (path / "model.safetensors").exists():
        from safetensors.torch import load_file
        return load_file(path / "model.safetensors", device="cpu")
    if (path / "model.pt").exists():
        return torch.load(path / "model.pt", map_location="cpu", weights_only=True)
    raise CheckpointError(f"{path} holds no model weights (model.safetensors or model.pt): "
                          "pass a checkpoint folder written by gdro train")


def restore_model(model: torch.nn.Module, folder: str | os.PathLike[str]) -> None:
    """Load a checkpoint's model tensors into ``model``; a key may be missing only when it is tied
    to (shares memory with) a loaded one, and no key may be unknown."""
    state = read_model_state(folder)
    own = model.state_dict()
    unknown = sorted(set(state) - set(own))
    pointers = {own[k].data_ptr() for k in state if k in own}
    untied = sorted(k for k in set(own) - set(state) if own[k].data_ptr() not in pointers)
    if unknown or untied:
        name = (unknown or untied)[0]
        raise CheckpointError(f"checkpoint {folder} does not fit the model ({'unknown' if unknown else 'missing'} "
                              f"tensor {name}): resume or export with the run's own model")
    try:
        model.load_state_dict(state, strict=False)
    except RuntimeError as err:   # shapes differ
        detail = " ".join(str(err).split())[:200]
        raise CheckpointError(f"checkpoint {folder} does not fit the model ({detail}): resume or export with "
                              "the run's own model") from None


def load_checkpoint(run_dir: str | os.PathLike[str], *, model: torch.nn.Module,
                    optimizer: torch.optim.Optimizer, scheduler: Any, controllers: Mapping[str, Any],
                    step: int | None = None) -> tuple[int, dict[str, Any]]:
    """Restore the newest (or the given) checkpoint into the objects; returns (step, data_state).

    The RNG states are restored last, so nothing run here consumes random numbers afterwards.
    """
    steps = resumable_steps(run_dir)
    if not steps:
        raise CheckpointError(f"{run_dir} has no complete checkpoint with an optimizer state: start a new run "
                              "instead of resuming")
    chosen = steps[-1] if step is None else int(step)
    path = step_folder(run_dir, chosen)
    try:
        restore_model(model, path)
        optimizer.load_state_dict(torch.load(path / "optimizer.pt", map_location="cpu", weights_only=True))
        trainer = torch.load(path / "trainer.pt", map_location="cpu", weights_only=False)
        states = decode_state(json.loads((path / "controllers.json").read_text(encoding="utf-8")))
    except CheckpointError:
        raise
    except Exception as err:  # torch.load raises many types (pickle, zip, runtime) on a damaged file
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
