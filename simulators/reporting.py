"""Output folders and series helpers of the simulator's study reports.

The statistics, text and figure helpers shared with the real-run studies live in ``studykit``
(docs/simulator-notes.md#simulators-reporting).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Sequence

import numpy as np

from gdro_lab import ConfigError
from gdro_lab.runformat import output
from gdro_lab.runformat.runlog import find_runs, read_run
from simulators.loop import PRODUCER

__all__ = ["prepare_output", "claim_output", "stack"]


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


def simulator_folder(out_dir: Path) -> bool:
    """Whether ``out_dir`` is a simulator output written before the write policy's marker: its ``runs/``
    holds simulator runs and nothing else (:func:`gdro_lab.runformat.output.claim_output` accepts it)."""
    runs = out_dir / "runs"
    return runs.is_dir() and _runs_problem(runs) is None and bool(find_runs(runs))


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
    """The write policy (:func:`gdro_lab.runformat.output.claim_output`) for a simulator command: a new or
    empty folder, one ``command`` claimed, or an earlier simulator output (:func:`simulator_folder`)."""
    return output.claim_output(out_dir, command, flag, accept=simulator_folder)


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
