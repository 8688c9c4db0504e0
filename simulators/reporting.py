"""Output folders and series helpers of the simulator's study reports.

The statistics, text and figure helpers shared with the real-run studies live in ``studykit``
(docs/design-notes.md#simulators-reporting).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Sequence

import numpy as np

from gdro_lab import ConfigError
from gdro_lab.runformat.runlog import find_runs, read_run
from simulators.loop import PRODUCER

__all__ = ["prepare_output", "claim_output", "stack"]

#: Written into every output folder a simulator command claims: the folder is ours to rewrite.
OUTPUT_MARKER = ".gdro-simulator-output"


def prepare_output(out_dir: Path) -> Path:
    """Create ``out_dir``; clear ``out_dir/runs`` if it holds only earlier simulator runs.

    Anything else under ``runs/`` (a run another producer wrote, stray files) is left alone and
    reported, so a study never deletes data it did not make.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = out_dir / "runs"
    if runs.exists():
        problem = _runs_problem(runs)
        if problem is not None:
            raise ConfigError(f"{runs} {problem}: choose another --out")
        shutil.rmtree(runs)
    return out_dir


def output_problem(out_dir: Path) -> str | None:
    """Why a simulator command must not write into ``out_dir``, or None when it may.

    It may write into a folder that does not exist, an empty one, or one it wrote before (:data:`OUTPUT_MARKER`);
    the rule in full: docs/design-notes.md#simulators-reporting.
    """
    if not out_dir.exists() and not out_dir.is_symlink():
        return None
    if not out_dir.is_dir():
        return "is a file, not a folder"
    entries = sorted(out_dir.iterdir())
    if not entries or (out_dir / OUTPUT_MARKER).is_file():
        return None
    runs = out_dir / "runs"
    if runs.is_dir():
        problem = _runs_problem(runs)
        if problem is not None:
            return problem
        if find_runs(runs):
            return None
    return f"holds files a simulator command did not write ({entries[0].name}, {len(entries)} entries in all)"


def _runs_problem(runs: Path) -> str | None:
    """Why ``runs`` is not a folder of simulator runs only (a run of another producer, a stray file), or None."""
    run_dirs = find_runs(runs)
    foreign = [p for p in run_dirs if read_run(p).meta.get("producer") != PRODUCER]
    if foreign:
        return f"holds runs not written by the simulator ({foreign[0]})"
    stray = [p for p in runs.rglob("*") if p.is_file() and not any(_is_inside(p, r) for r in run_dirs)]
    if stray:
        return f"holds files that are not simulator runs ({stray[0]})"
    return None


def claim_output(out_dir: Path, flag: str = "--out", command: str = "gdro simulate") -> Path:
    """Check ``out_dir`` (:func:`output_problem`: a one-line ConfigError, nothing written), create it
    and mark it as written by ``command``."""
    problem = output_problem(out_dir)
    if problem is not None:
        raise ConfigError(f"{flag} {out_dir} {problem}: give a new or empty folder, or one {command} wrote "
                          "(nothing was written)")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / OUTPUT_MARKER).write_text(f"written by {command}: it may replace report.md, summary.json, figures "
                                         "and runs/ here\n", encoding="utf-8")
    return out_dir


def _is_inside(path: Path, parent: Path) -> bool:
    try:
        path.relative_to(parent)
        return True
    except ValueError:
        return False


def stack(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """Stack per-seed series of possibly different lengths (truncated to the shortest)."""
    length = min(len(a) for a in arrays)
    return np.stack([np.asarray(a)[:length] for a in arrays])
