"""A trained model as a Hugging Face folder (``gdro export``, :mod:`real_runs.export_cli`).

OUT holds the model, its configs and the tokenizer, nothing of the training state, so transformers,
``gdro eval`` and vLLM load it. A run directory means its newest checkpoint; ``--dtype`` re-saves in
that precision. OUT must not exist or be empty; it is written to a temporary folder and renamed.
Detail: docs/train-notes.md#real_runs-export.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from real_runs.checkpoint import TRAINING_FILES, checkpoint_steps, restore_model, step_folder


class ExportError(ValueError):
    """Bad input for `gdro export`; one line naming the problem and the fix."""


def weights_problem(folder: str | os.PathLike[str]) -> str | None:
    """Why the safetensors weights in ``folder`` are damaged (truncated, or not safetensors), or None.

    Reads only each file's header: 8 bytes of little-endian length N, N bytes of JSON naming every
    tensor's ``data_offsets``; a whole file is exactly 8 + N + the largest end offset bytes long.
    """
    for path in sorted(Path(folder).glob("*.safetensors")):
        size = path.stat().st_size
        try:
            with open(path, "rb") as handle:
                length = int.from_bytes(handle.read(8), "little")
                if size < 8 or length > size - 8:
                    return f"{path} is truncated ({size:,} bytes, shorter than its own header)"
                header = json.loads(handle.read(length))
            end = max((int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"), default=0)
        except (ValueError, KeyError, TypeError, IndexError, AttributeError):
            return f"{path} is not a safetensors file (its header does not parse)"
        if size != 8 + length + end:
            return f"{path} is truncated ({size:,} bytes of the {8 + length + end:,} its header lists)"
    return None


def find_checkpoint(source: str | os.PathLike[str]) -> Path:
    """A checkpoint folder (``.../checkpoints/step_N``) or a run directory's newest checkpoint."""
    path = Path(source)
    if (path / "trainer.pt").exists():
        return path
    if (path / "meta.json").exists():
        producer = _producer(path)
        if producer and producer != "gdro train":
            raise ExportError(f"{path} is a run of {producer!r}, not of gdro train: it holds no model to "
                              "export; pass a gdro train run directory")
        steps = checkpoint_steps(path)
        if not steps:
            raise ExportError(f"{path} is a run without a complete checkpoint: train until one is saved")
        return step_folder(path, steps[-1])
    if not path.exists():
        raise ExportError(f"{path} does not exist: pass a run directory or RUN_DIR/checkpoints/step_N")
    raise ExportError(f"{path} is neither a gdro train run nor one of its checkpoints: pass RUN_DIR or "
                      "RUN_DIR/checkpoints/step_N")


def _producer(run_dir: Path) -> str:
    """The ``producer`` of a run's meta.json ("" when it cannot be read)."""
    try:
        return str(json.loads((run_dir / "meta.json").read_text(encoding="utf-8")).get("producer", ""))
    except (OSError, ValueError, AttributeError):
        return ""


def _rebuild(checkpoint: Path, target: Path, dtype: str | None) -> None:
    """Load the checkpoint's weights into its run's model and save_pretrained it."""
    import torch

    from real_runs.models import load_policy, resolve_dtype
    model: Any
    tokenizer: Any
    if (checkpoint / "config.json").exists():
        from transformers import AutoModelForCausalLM, AutoTokenizer
        model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(checkpoint, local_files_only=True)
    else:  # an older checkpoint: model.pt on the run's own architecture
        run_config = json.loads((checkpoint.parent.parent / "config.json").read_text(encoding="utf-8"))
        name = run_config["model"]["name"]
        model, tokenizer = load_policy(name, dtype="float32", seed=int(run_config["train"]["seed"]))
        restore_model(model, checkpoint)
    if dtype is not None:
        model = model.to(resolve_dtype(dtype, "cpu"))
    model.config.use_cache = True
    model.save_pretrained(target, max_shard_size="5GB")
    tokenizer.save_pretrained(target)


def check_dtype(dtype: str | None) -> None:
    """``--dtype`` is None (as trained), float32, bfloat16 or float16; else one line, before anything is touched."""
    if dtype not in (None, "float32", "bfloat16", "float16"):
        raise ExportError(f"--dtype {dtype}: use float32, bfloat16 or float16 (nothing was touched)")


def export(source: str | os.PathLike[str], out: str | os.PathLike[str], dtype: str | None = None) -> Path:
    """Write the Hugging Face folder of a run's checkpoint to ``out``; returns ``out``."""
    check_dtype(dtype)
    checkpoint = find_checkpoint(source)
    target = Path(out)
    damaged = weights_problem(checkpoint)
    if damaged is not None:
        raise ExportError(f"{damaged}: export an earlier checkpoint (RUN_DIR/checkpoints/step_N; nothing was written)")
    tmp = target.with_name(f".tmp-{target.name}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        hf_folder = (checkpoint / "config.json").exists()
        if hf_folder and dtype in (None, "float32"):
            for file in checkpoint.iterdir():
                if file.is_file() and file.name not in TRAINING_FILES:
                    shutil.copy2(file, tmp / file.name)
        else:
            _rebuild(checkpoint, tmp, dtype)
        if target.exists():
            target.rmdir()
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target

