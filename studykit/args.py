"""What every `gdro` command shares for bad input: one-line usage errors, the closest known names,
and checks of the paths a user names (a folder to read, a new folder to write).

Every message names the argument as the user typed it (``--out X``, ``--resume X``, ``RUN_DIR X``)
and what is wrong with it: missing, a file where a folder is expected, an unknown name with the
closest known ones. Standard library only, so the simulator, the trainer and the app can all use
it (the CLI, gdro_cli, sits above every part and imports them lazily, by name); it lives in studykit,
below the parts, so no part imports the CLI.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
from pathlib import Path
from typing import Iterable, NoReturn, Sequence


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line on stderr, exit status 2, no usage block:

        gdro app: error: argument --port: invalid int value: 'abc' (see gdro app --help)
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {with_suggestion(message)} (see {self.prog} --help)\n")


def with_suggestion(message: str) -> str:
    """argparse's ``invalid choice: 'x' (choose from 'a', 'b')`` with the closest choice suggested."""
    found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if found is None:
        return message
    hint = did_you_mean(found.group(1), re.findall(r"'([^']*)'", found.group(2)))
    return f"{message}: {hint}" if hint else message


def closest(name: str, known: Iterable[str], count: int = 3) -> list[str]:
    """Up to ``count`` of ``known`` that look most like ``name`` (difflib ratio >= 0.6, best first)."""
    return difflib.get_close_matches(name, list(known), n=count, cutoff=0.6)


def did_you_mean(name: str, known: Iterable[str], count: int = 3) -> str:
    """``"did you mean 'a' or 'b'?"`` for the closest known names, or ``""`` when none is close."""
    return suggest(closest(name, known, count))


def suggest(names: Sequence[str]) -> str:
    """``"did you mean 'a', 'b' or 'c'?"`` (``""`` for no names)."""
    if not names:
        return ""
    quoted = [repr(n) for n in names]
    return "did you mean " + (quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]) + "?"


def folder_problem(path: str | os.PathLike[str], what: str = "folder") -> str | None:
    """Why ``path`` is not an existing folder (``"does not exist"``, ``"is a file, not a folder"``), or None."""
    p = Path(path)
    if p.is_dir():
        return None
    if not p.exists():
        return "does not exist" if not p.is_symlink() else "is a broken link"
    return f"is a file, not a {what}"


def new_folder_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot be a new output folder (a file; a folder that is not empty), or None.

    A command that writes only into new or empty folders checks this before it writes anything.
    """
    p = Path(path)
    if not p.exists() and not p.is_symlink():
        return None
    if not p.is_dir():
        return "is a file, not a folder"
    if any(p.iterdir()):
        return "is a folder that is not empty"
    return None
