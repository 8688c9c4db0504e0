"""Sweeps: a run's final metric against each swept config key, one line per method, and the
parallel coordinates of a sweep. No Streamlit here.

One line per method (:func:`line_of`; step-matched GRPO its own); swept keys from
:func:`apps.data.identity.varying_keys`; :func:`sweep_frame` gives the mean final value per key value
with its 95% t-interval. Detail: docs/app-data-notes.md#apps-data-sweep.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from apps.data import identity, results, study
from gdro_lab.runformat.runlog import RunData

FINALS = ("tail mean", "last value")
LR_KEYS = ("lr_scale", "optim.lr_scale")
#: Keys of a step-matched baseline (the method it is matched to, and which moment): they name its line.
MATCH_KEYS = ("matched_to", "match")


def line_of(config: Mapping[str, Any], fallback: str = "") -> str:
    """The sweep line of a run: its method, and for a step-matched baseline the method it is
    matched to and the moment (``first_moment`` -> ``first``)."""
    method = identity.method_of(config, fallback)
    matched_to, match = config.get("matched_to"), config.get("match")
    if identity.is_empty(matched_to):
        return method
    moment = str(match).removesuffix("_moment") if not identity.is_empty(match) else "?"
    return f"{method} (matched to {matched_to}, {moment})"


def run_final(run: RunData, metric: str, final: str = "tail mean") -> float:
    """A run's final value of a metric: the tail average (:func:`apps.data.study.final_value`) or the
    last finite logged value (an evaluation metric: its last evaluation)."""
    if final == "tail mean":
        return study.final_value(run, metric)
    _, values = results.metric_series(run, metric)
    if values.size:
        return float(values[-1])
    return study.final_value(run, metric)


def sweep_keys(configs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The keys swept over these runs (their values differ; method, seeds and bookkeeping left
    out), a learning-rate scale first, then numeric keys, then the rest."""
    identities = [identity.identity(config) for config in configs.values()]
    by_method: dict[str, list[dict[str, Any]]] = {}
    for config, flat in zip(configs.values(), identities):
        by_method.setdefault(line_of(config), []).append(flat)
    # swept: a key that varies within some line (keys that follow from the method, such as its
    # controllers' resolved settings, or name a matched baseline's line, are not)
    keys = [key for key in identity.varying_keys(identities) if key != "method" and key not in MATCH_KEYS
            and any(len({identity.MISSING if key not in flat else str(flat[key]) for flat in flats}) > 1
                    for flats in by_method.values())]

    def rank(key: str) -> tuple[int, int]:
        values = [flat.get(key) for flat in identities if key in flat]
        numeric = all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in values)
        return (0 if key in LR_KEYS else 1, 0 if numeric else 1)

    return sorted(keys, key=rank)


def _value(config: Mapping[str, Any], key: str) -> Any:
    return identity.identity(config).get(key, identity.MISSING)


def sweep_frame(runs: Mapping[str, RunData], key: str, metric: str, final: str = "tail mean",
                min_runs: int = study.MIN_BAND_SEEDS) -> pd.DataFrame:
    """Per method and value of ``key``: the mean final ``metric`` over the runs with that value, its
    95% t-interval (NaN with fewer than ``min_runs`` runs) and ``n``. Columns: key value (as
    ``value_of_key``: numbers as floats, else text), method, value, lo, hi, n; sorted."""
    rows: dict[tuple[str, Any], list[float]] = {}
    for run in runs.values():
        method = line_of(run.config, fallback=run.path.name)
        rows.setdefault((method, _value(run.config, key)), []).append(run_final(run, metric, final))
    out = []
    for (method, setting), values in rows.items():
        mean, lo, hi = study.t_interval(np.array(values, dtype=float))
        finite = int(np.isfinite(values).sum())
        if finite < min_runs:
            lo = hi = float("nan")
        numeric = isinstance(setting, (int, float)) and not isinstance(setting, bool)
        out.append({"value_of_key": float(setting) if numeric else str(setting), "method": method, "value": mean,
                    "lo": lo, "hi": hi, "n": finite})
    frame = pd.DataFrame(out, columns=["value_of_key", "method", "value", "lo", "hi", "n"])
    return frame.sort_values(["method", "value_of_key"], key=lambda column: column.map(_order)).reset_index(drop=True)


def _order(value: Any) -> Any:
    return (0, float(value), "") if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else (1, 0.0, str(value))


def parallel_frame(runs: Mapping[str, RunData], keys: Sequence[str], metric: str, final: str = "tail mean",
                   names: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Long frame of the parallel coordinates: per run (``run``: its name) and axis (each key,
    then the metric): the raw value (``raw``) and its position on the axis in [0, 1] (``position``:
    min–max over the runs; numbers on a log scale for learning-rate keys; text in sorted order).
    Columns: run, method, axis, raw, position."""
    axes = [*keys, metric]
    table: dict[str, dict[str, Any]] = {}
    for label, run in runs.items():
        row = {key: _value(run.config, key) for key in keys}
        row[metric] = run_final(run, metric, final)
        table[label] = row
    positions: dict[str, dict[str, float]] = {label: {} for label in table}
    for axis in axes:
        values = [table[label][axis] for label in table]
        numeric = all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in values)
        if numeric:
            numbers = np.array(values, dtype=float)
            if axis in LR_KEYS and np.all(numbers > 0):
                numbers = np.log(numbers)
            low, high = np.nanmin(numbers), np.nanmax(numbers)
            span = high - low if np.isfinite(high - low) and high > low else 1.0
            for label, number in zip(table, numbers):
                positions[label][axis] = float((number - low) / span) if np.isfinite(number) else float("nan")
        else:
            order = sorted({str(value) for value in values})
            for label, value in zip(table, values):
                positions[label][axis] = order.index(str(value)) / max(len(order) - 1, 1)
    rows = [{"run": (names or {}).get(label, label), "method": line_of(runs[label].config),
             "axis": axis, "raw": str(table[label][axis]), "position": positions[label][axis]}
            for label in table for axis in axes]
    return pd.DataFrame(rows, columns=["run", "method", "axis", "raw", "position"])
