"""The write policy of every ``gdro`` command's output folder: nothing of the user's is ever replaced.

A command writes only into a folder that does not exist yet, an empty one, or one it made itself
(:data:`MARKER`, a small text file naming each command that claimed the folder). Anything else
(a folder of the user's own files, a folder another command wrote) is refused with one line, before
any compute, and nothing is written. The check also creates the folder and writes the marker, so an
unwritable ``--out`` fails at once too, not after the work. Standard library only: the simulator,
the trainer, eval, export and the report all call :func:`claim_output`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from gdro_lab._validate import ConfigError

__all__ = ["MARKER", "claim_output", "output_problem", "owners"]

#: Written into every output folder a command claims; one line per command that claimed it.
MARKER = ".gdro-output"
#: The simulator's marker before :data:`MARKER`: a folder with it belongs to gdro simulate and gdro sweep.
LEGACY_MARKERS = {".gdro-simulator-output": ("gdro simulate", "gdro sweep")}


def owners(out_dir: str | os.PathLike[str]) -> set[str]:
    """The commands that claimed ``out_dir`` (its :data:`MARKER` lines, and a legacy marker's commands)."""
    folder = Path(out_dir)
    found: set[str] = set()
    try:
        text = (folder / MARKER).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = ""
    found.update(line.removeprefix("written by ").split(":")[0].strip() for line in text.splitlines()
                 if line.startswith("written by "))
    for name, commands in LEGACY_MARKERS.items():
        if (folder / name).is_file():
            found.update(commands)
    return found


def output_problem(out_dir: str | os.PathLike[str], command: str,
                   accept: Callable[[Path], bool] | None = None) -> str | None:
    """Why ``command`` must not write into ``out_dir``, or None when it may.

    It may write into a folder that does not exist, an empty one, one it claimed before (its name in
    :data:`MARKER`), or one ``accept`` vouches for (the simulator's folders written before the marker).
    """
    folder = Path(out_dir)
    if not folder.exists():
        return "is a broken link" if folder.is_symlink() else None
    if not folder.is_dir():
        return "is a file, not a folder"
    try:
        entries = sorted(folder.iterdir())
    except OSError as err:
        return f"cannot be read ({err.strerror})"
    if not entries or command in owners(folder) or (accept is not None and accept(folder)):
        return None
    others = sorted(owners(folder))
    if others:
        return f"was written by {' and '.join(others)}, not {command}"
    return f"holds files {command} did not write ({entries[0].name}, {len(entries)} entries in all)"


def claim_output(out_dir: str | os.PathLike[str], command: str, flag: str = "--out",
                 accept: Callable[[Path], bool] | None = None) -> Path:
    """Check ``out_dir`` (:func:`output_problem`), create it and add ``command`` to its marker.

    Raises a one-line :class:`ConfigError` naming ``flag`` when the folder is not the command's to
    write or cannot be written (nothing of the user's is touched either way). Call it before any compute.
    """
    folder = Path(out_dir)
    problem = output_problem(folder, command, accept)
    if problem is not None:
        raise ConfigError(f"{flag} {folder} {problem}: give a new or empty folder, or one {command} wrote "
                          "(nothing was written)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if command not in owners(folder) or not (folder / MARKER).is_file():
            with open(folder / MARKER, "a", encoding="utf-8") as marker:
                marker.write(f"written by {command}: it may replace the files it writes here\n")
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise ConfigError(f"{flag} {folder} cannot be written ({reason}): give a folder you can write") from None
    return folder
