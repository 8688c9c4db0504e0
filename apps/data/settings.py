"""Where the app looks for runs: ``--root DIR RUN...`` after ``--``, the environment, or ``./runs``.

A path given without ``--root`` is a run when it has a ``meta.json``; a folder without one is a folder of
runs (:func:`place_paths`): the first becomes the root, so ``gdro app gdro-runs/`` lists every run under it.

``gdro app`` starts ``streamlit run apps/streamlit_app.py ... -- --root DIR RUN...``; Streamlit
hands the words after ``--`` to the script as ``sys.argv[1:]``. Without them (for example under
``streamlit.testing``) the app reads ``GDRO_APP_ROOT`` and ``GDRO_APP_RUNS`` (run folders
separated by ``os.pathsep``). Command-line values win over the environment.
"""

from __future__ import annotations

import argparse
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

ROOT_ENV = "GDRO_APP_ROOT"
RUNS_ENV = "GDRO_APP_RUNS"
DEFAULT_ROOT = Path("runs")
#: Set by the app script when its first run in this process has finished (``apps/serve.py`` then
#: imports the chart modules, which the landing page does not need).
FIRST_RUN_DONE = threading.Event()


@dataclass(frozen=True)
class PlacedPaths:
    """The root and the run folders that the paths a user typed stand for (:func:`place_paths`)."""

    root: Path | None
    run_dirs: tuple[Path, ...]
    #: Folders of runs given beside the root, with the number of run folders found in each.
    folders: tuple[tuple[Path, int], ...] = ()


def place_paths(paths: Sequence[Path], root: Path | None) -> PlacedPaths:
    """Sort typed paths into a root and run folders.

    A path with a ``meta.json``, or that is not a folder, stays a run folder (a page says what is
    wrong with it). A folder without a ``meta.json`` is a folder of runs: the first becomes the root
    when ``root`` is None; any other gives its run folders (those that hold a ``meta.json``), and stays
    a run folder itself when it holds none, so that the page names it.
    """
    from apps.data.listing import find_candidates  # lazily: settings is read before any listing

    run_dirs: list[Path] = []
    folders: list[tuple[Path, int]] = []
    for path in paths:
        if (path / "meta.json").exists() or not path.is_dir():
            run_dirs.append(path)
        elif root is None:
            root = path
        else:
            found, _ = find_candidates(path)
            folders.append((path, len(found)))
            run_dirs.extend(found or [path])
    return PlacedPaths(root, tuple(run_dirs), tuple(folders))


@dataclass(frozen=True)
class AppSettings:
    """The folder scanned for runs and the run folders given explicitly."""

    root: Path
    run_dirs: tuple[Path, ...]


def argument_parser() -> argparse.ArgumentParser:
    """The arguments the app script accepts after ``--`` (also used by ``gdro app``)."""
    parser = argparse.ArgumentParser(prog="gdro app", add_help=False)
    parser.add_argument("run_dirs", nargs="*", type=Path, metavar="RUN_DIR",
                        help="run directories to list in addition to those under --root")
    parser.add_argument("--root", type=Path, default=None,
                        help=f"folder scanned for run directories (default: ${ROOT_ENV} or ./{DEFAULT_ROOT})")
    return parser


def resolve_settings(script_args: Sequence[str] | None, environ: Mapping[str, str]) -> AppSettings:
    """Settings from the script's own arguments (None when it has none) and the environment."""
    root: Path | None = None
    run_dirs: list[Path] = []
    if script_args:
        parsed, _unknown = argument_parser().parse_known_args(list(script_args))
        placed = place_paths(parsed.run_dirs, parsed.root)
        root, run_dirs = placed.root, list(placed.run_dirs)
    if root is None:
        root = Path(environ[ROOT_ENV]) if environ.get(ROOT_ENV) else DEFAULT_ROOT
    if not run_dirs and environ.get(RUNS_ENV):
        run_dirs = [Path(part) for part in environ[RUNS_ENV].split(os.pathsep) if part]
    return AppSettings(root=root, run_dirs=tuple(run_dirs))


def script_arguments(argv: Sequence[str], script_file: str) -> list[str] | None:
    """``argv[1:]`` when ``argv[0]`` is the app script (``streamlit run``), else None (tests, imports)."""
    if not argv:
        return None
    try:
        same = Path(argv[0]).resolve() == Path(script_file).resolve()
    except OSError:
        same = False
    return list(argv[1:]) if same else None
