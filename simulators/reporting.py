"""Shared helpers of the study reports: seed statistics, tables, figures, output folders.

Confidence intervals are 95% Student-t intervals over seeds: mean +- t_{0.975, S-1} sd / sqrt(S)
(undefined, shown as n/a, for a single seed). Paired differences use the same seeds (the same
world instance and batch order) for both methods, which removes the world-to-world variance.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any, Iterable, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from gdro_lab import ConfigError  # noqa: E402
from gdro_lab.runlog import find_runs, read_run  # noqa: E402
from simulators.loop import PRODUCER  # noqa: E402

__all__ = ["plt", "mean_ci", "fmt", "markdown_table", "prepare_output", "save_figure", "write_json",
           "band", "stack"]


def mean_ci(values: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(mean, 95% half-width) over ``axis`` (seeds), ignoring NaN; half-width NaN with < 2 values."""
    arr = np.asarray(values, float)
    count = np.sum(np.isfinite(arr), axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"), _quiet():
        mean = np.nanmean(arr, axis=axis)
        sd = np.nanstd(arr, axis=axis, ddof=1)
        quantile = stats.t.ppf(0.975, np.maximum(count - 1, 1))
        half = np.where(count >= 2, quantile * sd / np.sqrt(np.maximum(count, 1)), np.nan)
    return mean, half


class _quiet:
    def __enter__(self) -> None:
        import warnings
        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc: Any) -> None:
        self._ctx.__exit__(*exc)


def fmt(*args: Any, **kwargs: Any) -> str:
    """'m ± h' (or 'm' when the half-width is undefined): ``fmt(mean, half, digits=3, scale=1.0, unit="")``.

    Takes ``*args`` so the common ``fmt(*mean_ci(x), ...)`` and ``fmt(*entry[name], ...)`` type-check."""
    return _fmt(*args, **kwargs)


def _fmt(mean: float, half: float, digits: int = 3, scale: float = 1.0, unit: str = "") -> str:
    if not math.isfinite(float(mean)):
        return "n/a"
    text = f"{mean * scale + 0.0:.{digits}f}{unit}".replace("-0." + "0" * digits, "0." + "0" * digits)
    if math.isfinite(float(half)):
        text += f" ± {half * scale:.{digits}f}{unit}"
    return text


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


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


def save_figure(fig: Any, path: Path) -> str:
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path.name


def write_json(path: Path, payload: Any) -> None:
    from gdro_lab.runlog import to_jsonable
    path.write_text(json.dumps(to_jsonable(payload), indent=1, allow_nan=False) + "\n", encoding="utf-8")


def band(ax: Any, x: np.ndarray, values_SX: np.ndarray, label: str, color: Any = None) -> None:
    """Seed mean with its 95% CI band."""
    mean, half = mean_ci(values_SX, axis=0)
    line, = ax.plot(x, mean, label=label, color=color, lw=1.4)
    if np.any(np.isfinite(half)):
        ax.fill_between(x, mean - half, mean + half, color=line.get_color(), alpha=0.2, lw=0)


def stack(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """Stack per-seed series of possibly different lengths (truncated to the shortest)."""
    length = min(len(a) for a in arrays)
    return np.stack([np.asarray(a)[:length] for a in arrays])
