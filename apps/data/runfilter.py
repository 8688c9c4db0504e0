"""Numeric conditions on the run table's columns (``test/accuracy (final) > 0.6``), and its rows
grouped with their aggregates.

Filter syntax (:func:`parse_filter`): conditions joined by ``and``, ``,`` or ``;``, each
``COLUMN OP VALUE`` with OP one of ``>``, ``>=``, ``<``, ``<=``, ``==``, ``!=``, or a range
``LOW < COLUMN <= HIGH`` (any of ``<``/``<=`` on each side). COLUMN is a header of the table, or a
config key without ``config.``, or a logged scalar's name alone (its final value). VALUE is a
number; ``==`` and ``!=`` also take text (``method == grpo``). A row whose cell is blank fails every
condition but ``!=``. No Streamlit here.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from apps.data.runcolumns import ColumnSpec, parse_column

OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    ">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt, "<": operator.lt}
_OP = r"(>=|<=|==|!=|>|<|=)"
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_RANGE = re.compile(rf"^\s*(?P<low>{_NUMBER})\s*(?P<op1><=|<)\s*(?P<name>.+?)\s*(?P<op2><=|<)\s*(?P<high>{_NUMBER})\s*$")
_SIMPLE = re.compile(rf"^\s*(?P<name>.+?)\s*(?P<op>{_OP})\s*(?P<value>.+?)\s*$")
_SPLIT = re.compile(r"\s+and\s+|\s*[,;]\s*", re.IGNORECASE)


class FilterError(ValueError):
    """A filter that cannot be read; the message names the condition and the syntax."""


@dataclass(frozen=True)
class Condition:
    """``column OP value`` (``value`` a float, or text for ``==`` / ``!=``)."""

    column: str
    op: str
    value: float | str

    def __str__(self) -> str:
        value = f"{self.value:g}" if isinstance(self.value, float) else self.value
        return f"{self.column} {self.op} {value}"


def _number(text: str) -> float | None:
    try:
        return float(text) if re.fullmatch(_NUMBER, text.strip()) else None
    except ValueError:
        return None


def parse_filter(text: str) -> list[Condition]:
    """The conditions of a filter (empty text: none); raises :class:`FilterError` with the reason."""
    conditions: list[Condition] = []
    for part in (piece for piece in _SPLIT.split(text.strip()) if piece.strip()):
        ranged = _RANGE.match(part)
        if ranged is not None:
            name = _unquote(ranged["name"])
            conditions.append(Condition(name, ">=" if ranged["op1"] == "<=" else ">", float(ranged["low"])))
            conditions.append(Condition(name, ranged["op2"], float(ranged["high"])))
            continue
        simple = _SIMPLE.match(part)
        if simple is None:
            raise FilterError(f"cannot read `{part}`: write COLUMN OP VALUE (OP one of > >= < <= == !=) "
                              "or LOW < COLUMN < HIGH, e.g. `test/accuracy > 0.6`")
        op = "==" if simple["op"] == "=" else simple["op"]
        number = _number(simple["value"])
        if number is None and op not in ("==", "!="):
            raise FilterError(f"`{part}`: {op} needs a number (text only with == or !=)")
        value: float | str = number if number is not None else _unquote(simple["value"])
        conditions.append(Condition(_unquote(simple["name"]), op, value))
    return conditions


def _unquote(text: str) -> str:
    text = text.strip()
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "`'\"" else text


def resolve_column(name: str, columns: Sequence[str], keys: Sequence[str] = ()) -> str | None:
    """The table header a condition's name means: the header itself (any case), ``config.<name>``,
    or, for a logged scalar's name among ``keys``, its final-value column (which the caller adds);
    None when it means none."""
    lowered = {column.lower(): column for column in columns}
    for candidate in (name, f"config.{name}"):
        if candidate.lower() in lowered:
            return lowered[candidate.lower()]
    if parse_column(name) is not None and parse_column(name).key in keys:  # type: ignore[union-attr]
        return name
    if name in keys:
        return ColumnSpec(name).name
    return None


def needed_columns(conditions: Sequence[Condition], columns: Sequence[str], keys: Sequence[str]) -> list[ColumnSpec]:
    """Metric columns the conditions name that the table does not have yet (to be computed)."""
    wanted = []
    for condition in conditions:
        resolved = resolve_column(condition.column, columns, keys)
        spec = parse_column(resolved) if resolved is not None and resolved not in columns else None
        if spec is not None and spec not in wanted:
            wanted.append(spec)
    return wanted


def filter_mask(table: pd.DataFrame, conditions: Sequence[Condition], keys: Sequence[str] = ()) -> np.ndarray:
    """Boolean mask of the rows that meet every condition; raises :class:`FilterError` for a
    column that is neither in the table nor a logged scalar."""
    keep = np.ones(len(table), dtype=bool)
    for condition in conditions:
        column = resolve_column(condition.column, list(table.columns), keys)
        if column is None or column not in table:
            raise FilterError(f"no column `{condition.column}`: use a column of the table, a config key or "
                              "a logged scalar (add it as a column first for best or mean of last k)")
        compare = OPERATORS[condition.op]
        if isinstance(condition.value, float):
            cells = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=float)
            with np.errstate(invalid="ignore"):
                met = compare(cells, condition.value)
            met = np.where(np.isnan(cells), condition.op == "!=", met)
        else:
            cells = table[column].astype(str).to_numpy()
            met = compare(cells, condition.value)
        keep &= np.asarray(met, dtype=bool)
    return keep


#: Fewest values a group's interval is shown for (as the bands of Study and Compare).
MIN_INTERVAL_SEEDS = 3


def group_table(table: pd.DataFrame, by: str, value_columns: Sequence[str], min_seeds: int = MIN_INTERVAL_SEEDS
                ) -> pd.DataFrame:
    """One row per value of ``by`` (in first-seen order): ``n`` runs, and per value column its mean
    over the group's finite values and a 95% Student-t interval (``<column> lo`` / ``<column> hi``)
    only where at least ``min_seeds`` values are finite (NaN otherwise); ``runs`` holds the members."""
    from apps.data.study import t_quantile  # scipy, only when rows are grouped

    keys = table[by].astype(str).fillna("")
    codes, uniques = pd.factorize(keys, sort=False)
    frame: dict[str, Any] = {by: list(uniques), "n": np.bincount(codes, minlength=len(uniques))}
    for column in value_columns:
        values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=float)
        finite = np.isfinite(values)
        count_G = np.bincount(codes[finite], minlength=len(uniques))
        total_G = np.bincount(codes[finite], weights=values[finite], minlength=len(uniques))
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_G = total_G / count_G
            squares_G = np.bincount(codes[finite], weights=(values[finite] - mean_G[codes[finite]]) ** 2,
                                    minlength=len(uniques))
            half_G = t_quantile(np.maximum(count_G - 1, 1)) * np.sqrt(squares_G / np.maximum(count_G - 1, 1)) \
                / np.sqrt(np.maximum(count_G, 1))
        shown_G = count_G >= max(min_seeds, 2)
        frame[column] = mean_G
        frame[f"{column} lo"] = np.where(shown_G, mean_G - half_G, np.nan)
        frame[f"{column} hi"] = np.where(shown_G, mean_G + half_G, np.nan)
    frame["runs"] = [tuple(table["run"].to_numpy()[codes == index]) for index in range(len(uniques))]
    return pd.DataFrame(frame)
