"""Controller state inside verl checkpoints (``<default_local_dir>/global_step_N/gdro_ctrl.json``),
the checkpoint a launch will resume, and the one-writer lock on our run directory.

The method step's state (RNG included) and the run's prompt numbering go next to verl's
``global_step_N/{actor,data.pt}``, encoded losslessly, so a resumed run continues exactly as an
uninterrupted one (departs from the released code, which loses it). Detail: docs/verl-notes.md#real_runs-verl-state.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

from gdro_lab.runformat.runlog import RunLock, RunLockedError, decode_state, encode_state, lock_holder
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


def lock_run_dir(run_dir: str | os.PathLike[str]) -> RunLock:
    """Create ``run_dir`` and take its one-writer lock (:class:`gdro_lab.runformat.runlog.RunLock`, the one
    implementation, ``run_dir/.writer.lock``); a refusal is a :class:`VerlPluginError`.

    The trainer process holds it from before it opens the run until ``release()``; the OS drops
    it when the process dies, even by SIGKILL, so a crashed job never blocks its resume.
    """
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    try:
        return RunLock(run_dir).acquire()
    except RunLockedError:
        raise VerlPluginError(_busy_message(Path(run_dir))) from None


def check_unlocked(run_dir: str | os.PathLike[str]) -> None:
    """Raise if another process holds ``run_dir``'s lock (creates nothing)."""
    try:
        RunLock.check(run_dir)
    except RunLockedError:
        raise VerlPluginError(_busy_message(Path(run_dir))) from None


def _busy_message(path: Path) -> str:
    return (f"gdro.run_dir={path} is being written by another process ({lock_holder(path)}): wait for that job "
            "to end, or use another gdro.run_dir (one writer per run)")


def resume_folder(trainer_config: Any) -> Path | None:
    """The ``global_step_N`` folder verl's ``_load_checkpoint`` will resume from, or None (verl 0.9.1 rules).

    ``resume_mode=disable``: none; ``auto``: the step named by ``latest_checkpointed_iteration.txt``
    under ``default_local_dir`` when that folder exists; ``resume_path``: ``resume_from_path``.
    """
    mode = str(trainer_config.get("resume_mode", "auto"))
    if mode == "disable":
        return None
    if mode == "resume_path":
        return Path(os.path.abspath(str(trainer_config.resume_from_path)))
    root = Path(os.path.abspath(str(trainer_config.default_local_dir)))
    tracker = root / "latest_checkpointed_iteration.txt"
    try:
        step = int(tracker.read_text().strip())
    except (OSError, ValueError):
        return None
    folder = root / f"global_step_{step}"
    return folder if folder.is_dir() else None
