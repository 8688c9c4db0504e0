"""Metric columns of the run table: any logged scalar as a column, as its final value, its best
value (max or min) or the mean of its last k values.

A run's scalars are read once per version of its files (:data:`SCALAR_CACHE`, keyed on
:func:`apps.data.loading.run_signature`) with the app's fast reader; only the finite values are kept:
each ``steps.jsonl`` scalar in step order, and each ``eval.jsonl`` metric in evaluation order (named
as logged, ``eval/<metric>`` when a step scalar has the same name). A column is computed for every
run at once (:func:`metric_columns`: one concatenated array per key, reduced by run with numpy).
No Streamlit here.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from apps.data.fastread import read_run_fast
from apps.data.filecache import FileCache
from apps.data.loading import run_key
from gdro_lab.runformat.runlog import STEPS_FILE, RunData, read_evals

#: Statistics of a column: the last value, the best (max or min by the key's direction), max, min,
#: the mean of the last k values.
STATS = ("final", "best", "max", "min", "last")
#: Words in a scalar's name that make lower better (its "best" is the minimum).
LOWER_IS_BETTER = ("loss", "error", "regret", "gap", "time", "perplexity", "kl")
EVAL_PREFIX = "eval/"
COLUMN_PATTERN = re.compile(r"^(?P<key>.+?) \((?P<stat>final|best|max|min|mean of last (?P<k>\d+))\)$")


@dataclass(frozen=True)
class ColumnSpec:
    """One metric column: a logged scalar ``key``, a statistic (:data:`STATS`) and, for ``last``, k."""

    key: str
    stat: str = "final"
    k: int = 1

    def __post_init__(self) -> None:
        if self.stat not in STATS:
            raise ValueError(f"statistic {self.stat!r} is not one of {', '.join(STATS)}")
        if self.stat == "last" and self.k < 1:
            raise ValueError(f"k={self.k}: the mean of the last k values needs k >= 1")

    @property
    def name(self) -> str:
        """The column's header: ``test/accuracy (best)``, ``mean_success (mean of last 5)``."""
        return f"{self.key} (mean of last {self.k})" if self.stat == "last" else f"{self.key} ({self.stat})"


def parse_column(name: str) -> ColumnSpec | None:
    """The spec of a column header written by :attr:`ColumnSpec.name`; None for any other text."""
    match = COLUMN_PATTERN.match(name.strip())
    if match is None:
        return None
    if match["k"] is not None:
        return ColumnSpec(match["key"], "last", int(match["k"]))
    return ColumnSpec(match["key"], match["stat"])


def lower_is_better(key: str) -> bool:
    """True when a smaller value of ``key`` is better (a loss, an error, a gap, a time...)."""
    words = re.split(r"[^a-z0-9]+", key.lower())
    return any(word in LOWER_IS_BETTER or word.startswith(("loss", "time")) for word in words)


@dataclass(frozen=True)
class RunScalars:
    """A run's logged scalars: key -> its finite values in logged order (steps, then evaluations)."""

    values: Mapping[str, np.ndarray]


def run_scalars(run: RunData) -> RunScalars:
    """The finite values of every step scalar and every numeric evaluation metric of a run (those
    with at least one)."""
    return _with_evals(dict(run.scalars), run.evals)


def _with_evals(step_scalars: Mapping[str, np.ndarray], evals: Sequence[Mapping[str, object]]) -> RunScalars:
    out: dict[str, np.ndarray] = {}
    for key, values_T in step_scalars.items():
        values_T = np.asarray(values_T, dtype=float)
        if np.isfinite(values_T).any():  # a scalar never logged with a value is no column
            out[key] = values_T[np.isfinite(values_T)]
    evaluated: dict[str, list[float]] = {}
    for record in evals:
        metrics = record.get("metrics")
        if not isinstance(metrics, Mapping):
            continue
        for name, value in metrics.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                evaluated.setdefault(str(name), []).append(float(value))
    for name, values in evaluated.items():
        out[f"{EVAL_PREFIX}{name}" if name in out else name] = np.asarray(values, dtype=float)
    return RunScalars(out)


#: How ``RunWriter`` writes a step record's scalars (``json.dumps``: a flat object of numbers or null).
_SCALARS = b'"scalars": {'


def read_scalars(path: Path) -> RunScalars:
    """A run's scalars as :func:`run_scalars` of the full run gives them, reading only each line's
    flat ``scalars`` object of ``steps.jsonl`` (the per-bin fields skipped: 1.5 to 2 times faster than
    reading the run at the 1,000-run root). A line it cannot read so (no such object, one that is not
    flat, a value that is not a number or null) sends the run to the full reader."""
    steps_file = path / STEPS_FILE
    raw = steps_file.read_bytes() if steps_file.exists() else b""
    rows = []
    for line in raw[: raw.rfind(b"\n") + 1].split(b"\n")[:-1]:  # a torn last line is dropped, as the readers do
        start = line.find(_SCALARS)
        end = line.find(b"}", start)
        if start < 0 or end < 0:
            return run_scalars(read_run_fast(path))
        try:
            rows.append(json.loads(line[start + len(_SCALARS) - 1:end + 1]))
        except ValueError:
            return run_scalars(read_run_fast(path))
    keys = sorted({key for row in rows for key in row})
    try:
        scalars = {key: np.array([row.get(key) for row in rows], dtype=float) for key in keys}
    except (TypeError, ValueError):
        return run_scalars(read_run_fast(path))
    return _with_evals(scalars, read_evals(path))


def _scalars_or_blank(path: Path) -> RunScalars:
    """The run's scalars, empty when it cannot be read (its cells stay blank; its own page says why)."""
    try:
        return read_scalars(path)
    except Exception:  # noqa: BLE001  (a damaged run)
        return RunScalars({})


#: The process-wide cache of runs' scalars (:class:`RunScalars` per run folder, read again when its files
#: change; shared by every session).
SCALAR_CACHE: FileCache[Path, RunScalars] = FileCache(run_key, _scalars_or_blank, max_entries=20_000,
                                                      thread_name="gdro-scalars")


def scalar_keys(scalars: Sequence[RunScalars]) -> list[str]:
    """Every key logged by any run (with at least one finite value), sorted; interval bounds
    (``X_lo``/``X_hi`` of a logged ``X``) left out."""
    keys = {key for run in scalars for key, values in run.values.items() if values.size}
    return sorted(key for key in keys if not (key.endswith(("_lo", "_hi")) and key[:-3] in keys))


def metric_columns(scalars: Sequence[RunScalars], specs: Sequence[ColumnSpec]) -> pd.DataFrame:
    """One row per run (in order), one column per spec (:attr:`ColumnSpec.name`); NaN where a run
    logs no finite value of the key. Computed for all runs at once: the key's values of every run
    concatenated, reduced per run by offsets (``reduceat``, cumulative sums)."""
    columns: dict[str, np.ndarray] = {}
    for spec in specs:
        parts = [run.values.get(spec.key, np.empty(0)) for run in scalars]
        columns[spec.name] = _reduce(parts, spec)
    return pd.DataFrame(columns, index=pd.RangeIndex(len(scalars)))


def _reduce(parts: Sequence[np.ndarray], spec: ColumnSpec) -> np.ndarray:
    """The statistic of each part (NaN for an empty one), vectorised over parts."""
    counts_R = np.array([part.size for part in parts], dtype=np.int64)
    out_R = np.full(len(parts), np.nan)
    has_R = counts_R > 0
    if not has_R.any():
        return out_R
    values = np.concatenate([part for part in parts if part.size])
    ends_R = np.cumsum(counts_R)
    starts_R = ends_R - counts_R
    stat = spec.stat
    if stat == "best":
        stat = "min" if lower_is_better(spec.key) else "max"
    if stat == "final":
        out_R[has_R] = values[ends_R[has_R] - 1]
    elif stat in ("max", "min"):
        reduce = np.maximum if stat == "max" else np.minimum
        out_R[has_R] = reduce.reduceat(values, starts_R[has_R])
    else:  # the mean of the last k values (all of them when fewer)
        cumulative = np.concatenate([[0.0], np.cumsum(values)])
        first_R = np.maximum(starts_R, ends_R - spec.k)
        taken_R = ends_R - first_R
        out_R[has_R] = (cumulative[ends_R[has_R]] - cumulative[first_R[has_R]]) / taken_R[has_R]
    return out_R
