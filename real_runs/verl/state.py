"""Controller state inside verl checkpoints: ``<default_local_dir>/global_step_N/gdro_ctrl.json``.

verl's ``_save_checkpoint`` writes ``global_step_N/{actor,data.pt}``; the plugin adds the
classifier, weighter and allocator ``state_dict()``s (RNG included) next to them, encoded
losslessly by :func:`gdro_lab.runlog.encode_state`, so a resumed run continues exactly as an
uninterrupted one. The released code keeps this state in module-level dicts and loses it on resume.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

from gdro_lab.runlog import decode_state, encode_state
from real_runs.verl import VerlPluginError

CTRL_FILE = "gdro_ctrl.json"
FORMAT = "gdro-verl-ctrl"
VERSION = 1


def step_folder(default_local_dir: str, step: int) -> Path:
    """verl's checkpoint folder of a step (relative paths resolved against the working directory)."""
    return Path(os.path.abspath(default_local_dir)) / f"global_step_{int(step)}"


def save_controller_state(folder: str | os.PathLike[str], step: int, state: Mapping[str, Any]) -> Path:
    """Write ``folder/gdro_ctrl.json`` atomically (temporary name, fsync, rename); returns the file."""
    target = Path(folder) / CTRL_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = {"format": FORMAT, "version": VERSION, "step": int(step), "state": encode_state(dict(state))}
    tmp = target.with_name(target.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(payload, handle, allow_nan=False)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, target)
    return target


def load_controller_state(folder: str | os.PathLike[str]) -> tuple[int, dict[str, Any]]:
    """Read ``folder/gdro_ctrl.json``: returns (step, state). One-line errors name the fix."""
    target = Path(folder) / CTRL_FILE
    if not target.exists():
        raise VerlPluginError(f"{folder} has no {CTRL_FILE}: it was not written by the GDRO plugin; resume "
                              "from a GDRO checkpoint or set gdro.resume_without_state=true to start "
                              "the controllers fresh")
    try:
        payload = json.loads(target.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise VerlPluginError(f"{target} is corrupt: resume from an earlier global_step_N folder") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT or "state" not in payload:
        raise VerlPluginError(f"{target} is not a GDRO controller file: resume from a GDRO checkpoint")
    if not isinstance(payload.get("version"), int) or payload["version"] > VERSION:
        raise VerlPluginError(f"{target} has version {payload.get('version')}, newer than this plugin "
                              f"reads ({VERSION}): upgrade gdro-lab")
    return int(payload["step"]), decode_state(payload["state"])
