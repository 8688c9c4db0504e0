"""Output folders and series helpers of the simulator's study reports.

The statistics (95% Student-t intervals over seeds, paired gains: ``gdro_lab.stats``), the text
helpers (``gdro_lab.tables``) and the figure helpers (``studyplots``) are shared with the real-run
studies and live there; they are re-exported here for the studies' imports. Paired differences
use the same seeds (the same world instance and batch order) for both methods, which removes the
world-to-world variance.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Sequence

import numpy as np

from gdro_lab import ConfigError
from gdro_lab.runlog import find_runs, read_run
from gdro_lab.stats import mean_ci
from gdro_lab.tables import fmt, markdown_table, write_json
from simulators.loop import PRODUCER
from studyplots import band, plt, save_figure

__all__ = ["plt", "mean_ci", "fmt", "markdown_table", "prepare_output", "save_figure", "write_json",
           "band", "stack"]


def prepare_output(out_dir: Path) -> Path:
    """Create ``out_dir``; clear ``out_dir/runs`` if it holds only earlier simulator runs.

    Anything else under ``runs/`` (a run another producer wrote, stray files) is left alone and
    reported, so a study never deletes data it did not make.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = out_dir / "runs"
    if runs.exists():
        run_dirs = find_runs(runs)
        foreign = [p for p in run_dirs if read_run(p).meta.get("producer") != PRODUCER]
        if foreign:
            raise ConfigError(f"{runs} holds runs not written by the simulator ({foreign[0]}): "
                              "choose another --out")
        stray = [p for p in runs.rglob("*") if p.is_file() and not any(
            _is_inside(p, r) for r in run_dirs)]
        if stray:
            raise ConfigError(f"{runs} holds files that are not simulator runs ({stray[0]}): choose another --out")
        shutil.rmtree(runs)
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
