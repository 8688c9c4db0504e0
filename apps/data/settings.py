"""Where the app looks for runs: ``--root DIR RUN...`` after ``--``, the environment, or ``./runs``.

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
        root, run_dirs = parsed.root, list(parsed.run_dirs)
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
