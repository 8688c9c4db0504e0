"""Sweeps: a run's final metric against each swept config key, one line per method, and the
parallel coordinates of a sweep. No Streamlit here.

One line per method (:func:`line_of`; step-matched GRPO its own); swept keys from
:func:`apps.data.identity.varying_keys`; :func:`sweep_frame` gives the mean final value per key value
with its 95% t-interval; :func:`parallel_frame` and :func:`parallel_ticks` the parallel coordinates,
:func:`brush_ranges`, :class:`Brushes` and :func:`runs_in_brush` what brushes on them keep. Detail:
docs/app-data-notes.md#apps-data-sweep.
"""

from __future__ import annotations

from dataclasses import dataclass
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


#: A numeric axis gets a tick at each of its values when it has at most this many, else at
#: :data:`TICK_POSITIONS` of its range.
TICK_VALUES_MAX, TICK_POSITIONS = 8, (0.0, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class Axis:
    """One axis of the parallel coordinates: numbers (on a log scale for a learning-rate key) spread
    min to max over [0, 1], or texts in sorted order."""

    name: str
    numeric: bool
    log: bool = False
    low: float = 0.0
    span: float = 1.0
    texts: tuple[str, ...] = ()

    def position(self, value: Any) -> float:
        """Where ``value`` sits on the axis, in [0, 1] (NaN for a missing number)."""
        if not self.numeric:
            return self.texts.index(str(value)) / max(len(self.texts) - 1, 1)
        number = float(value)
        if self.log:
            number = float(np.log(number)) if number > 0 else float("nan")
        return (number - self.low) / self.span if np.isfinite(number) else float("nan")

    def value_at(self, position: float) -> float:
        """The number at ``position`` of a numeric axis (the inverse of :meth:`position`)."""
        number = self.low + position * self.span
        return float(np.exp(number)) if self.log else float(number)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _table(runs: Mapping[str, RunData], keys: Sequence[str], metric: str, final: str) -> dict[str, dict[str, Any]]:
    """Per run: its value of each key and its final metric."""
    table: dict[str, dict[str, Any]] = {}
    for label, run in runs.items():
        row = {key: _value(run.config, key) for key in keys}
        row[metric] = run_final(run, metric, final)
        table[label] = row
    return table


def _axes(table: Mapping[str, Mapping[str, Any]], axes: Sequence[str]) -> list[Axis]:
    out = []
    for axis in axes:
        values = [row[axis] for row in table.values()]
        if not all(_is_number(value) for value in values):
            out.append(Axis(axis, False, texts=tuple(sorted({str(value) for value in values}))))
            continue
        numbers = np.array(values, dtype=float)
        log = axis in LR_KEYS and bool(np.all(numbers > 0))
        if log:
            numbers = np.log(numbers)
        finite = numbers[np.isfinite(numbers)]
        low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        out.append(Axis(axis, True, log, low, high - low if high > low else 1.0))
    return out


def parallel_frame(runs: Mapping[str, RunData], keys: Sequence[str], metric: str, final: str = "tail mean",
                   names: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Long frame of the parallel coordinates: per run (``run``: its name; ``label``: its folder)
    and axis (each key, then the metric; ``axis_index`` its place): the raw value (``raw``) and its
    position on the axis in [0, 1] (``position``, :class:`Axis`: min–max over the runs; numbers on a
    log scale for learning-rate keys; text in sorted order).
    Columns: run, label, method, axis, axis_index, raw, position."""
    axes = [*keys, metric]
    table = _table(runs, keys, metric, final)
    scales = _axes(table, axes)
    rows = [{"run": (names or {}).get(label, label), "label": label, "method": line_of(runs[label].config),
             "axis": axis.name, "axis_index": index, "raw": str(table[label][axis.name]),
             "position": axis.position(table[label][axis.name])}
            for label in table for index, axis in enumerate(scales)]
    return pd.DataFrame(rows, columns=["run", "label", "method", "axis", "axis_index", "raw", "position"])


def parallel_ticks(runs: Mapping[str, RunData], keys: Sequence[str], metric: str,
                   final: str = "tail mean") -> pd.DataFrame:
    """The ticks of each parallel axis: at each value of a numeric axis with at most
    :data:`TICK_VALUES_MAX` values (a learning-rate grid), else at :data:`TICK_POSITIONS` of its range
    (4 significant digits); at every text of a text axis. Columns: axis, axis_index, position, label."""
    table = _table(runs, keys, metric, final)
    rows = []
    for index, axis in enumerate(_axes(table, [*keys, metric])):
        values = [row[axis.name] for row in table.values()]
        if not axis.numeric:
            ticks = [(axis.position(text), text) for text in axis.texts]
        else:
            distinct = sorted({float(value) for value in values if np.isfinite(float(value))})
            if len(distinct) <= TICK_VALUES_MAX:
                ticks = [(axis.position(value), f"{value:.4g}") for value in distinct]
            else:
                ticks = [(position, f"{axis.value_at(position):.4g}") for position in TICK_POSITIONS]
        rows += [{"axis": axis.name, "axis_index": index, "position": position, "label": label}
                 for position, label in ticks]
    return pd.DataFrame(rows, columns=["axis", "axis_index", "position", "label"])


def brush_ranges(selection: Mapping[str, Any], axes: Sequence[str]) -> dict[str, tuple[float, float]]:
    """The brushed range of each axis from a Vega-Lite interval selection over the parallel
    coordinates (``{"axis_index": [a, b], "position": [low, high]}``): every axis whose index lies
    in [a, b] gets [low, high]; none for an empty selection."""
    across, along = selection.get("axis_index"), selection.get("position")
    if not (isinstance(across, Sequence) and isinstance(along, Sequence) and len(across) == 2 and len(along) == 2):
        return {}
    first, last = sorted(float(value) for value in across)
    low, high = sorted(float(value) for value in along)
    return {axis: (low, high) for index, axis in enumerate(axes) if first <= index <= last}


Ranges = dict[str, tuple[float, float]]


@dataclass
class Brushes:
    """The brushes of one sweep's parallel coordinates across reruns: Vega-Lite draws one rectangle
    at a time, so the rectangles drawn before the current one are *held* here, one range per axis.

    :meth:`step` takes the current rectangle's ranges (``live``, from :func:`brush_ranges`) and returns
    what filters the runs: the held ranges, with the live rectangle's in place of any on the same axes.
    A rectangle drawn over other axes than the previous one holds the previous one's ranges; clearing the
    live rectangle (a click outside it) drops only that one; :meth:`clear` drops them all."""

    held: Ranges
    last: Ranges

    @classmethod
    def empty(cls) -> "Brushes":
        return cls({}, {})

    def step(self, live: Mapping[str, tuple[float, float]]) -> Ranges:
        live = dict(live)
        if self.last and set(live) != set(self.last) and live:  # a new rectangle elsewhere: hold the previous one
            self.held.update(self.last)
        self.last = live
        return {**self.held, **live}

    def shown_held(self) -> Ranges:
        """The held ranges that the live rectangle does not replace (drawn as grey bands)."""
        return {axis: span for axis, span in self.held.items() if axis not in self.last}

    def clear(self) -> None:
        self.held, self.last = {}, {}


def runs_in_brush(frame: pd.DataFrame, ranges: Mapping[str, tuple[float, float]]) -> list[str]:
    """The runs (``label``s of a :func:`parallel_frame`) whose position on every brushed axis lies in
    its range (a missing value is outside); every run when nothing is brushed."""
    labels = list(dict.fromkeys(frame["label"]))
    if not ranges:
        return labels
    inside = pd.Series(True, index=labels)
    for axis, (low, high) in ranges.items():
        part = frame[frame["axis"] == axis].set_index("label")["position"].reindex(labels)
        inside &= ((part >= low) & (part <= high)).fillna(False)
    return [label for label in labels if inside[label]]


def run_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per run of a :func:`parallel_frame`: its name, method and the raw value on each axis."""
    if frame.empty:
        return pd.DataFrame(columns=["run", "method"])
    table = frame.pivot_table(index=["run", "method"], columns="axis", values="raw", aggfunc="first", sort=False)
    axes = list(dict.fromkeys(frame["axis"]))
    return table[axes].reset_index().rename_axis(columns=None)
