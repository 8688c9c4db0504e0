"""The Runs page's state that every view follows: its numeric filter (``where``, kept in the URL) and
the runs the views show (:func:`shown_picks`: the ticked rows that meet the filter, else the runs
that meet it). The sidebar calls :func:`filtered_runs` on every page, so that a filter typed on the
Runs page drives every chart. Tables from :mod:`apps.data.runtable`, metric columns from
:mod:`apps.data.runcolumns`, conditions from :mod:`apps.data.runfilter`.
"""

from __future__ import annotations

import threading
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import streamlit as st

from apps.data import runcolumns, runfilter, runtable
from apps.data.groups import Grouping
from apps.data.listing import RunInfo

#: Session (and URL) keys: the filter's text and the metric columns added.
WHERE_KEY, COLUMNS_KEY = "where", "cols"
#: With a filter and no ticked row among the runs it keeps, the views show at most this many of them.
MAX_FILTERED_SHOWN = 50
_MEMO: dict[Any, tuple[Sequence[RunInfo], tuple[tuple[str, ...] | None, str | None]]] = {}
_MEMO_LOCK = threading.Lock()


def where_text() -> str:
    """The filter typed on the Runs page (this session), else the URL's ``where``."""
    if WHERE_KEY not in st.session_state:
        st.session_state[WHERE_KEY] = str(st.query_params.get(WHERE_KEY) or "")
    return str(st.session_state[WHERE_KEY])


def column_specs() -> list[runcolumns.ColumnSpec]:
    """The metric columns added on the Runs page (this session), else the URL's ``cols``."""
    if COLUMNS_KEY not in st.session_state:
        st.session_state[COLUMNS_KEY] = [str(value) for value in st.query_params.get_all(COLUMNS_KEY)]
    specs = [runcolumns.parse_column(name) for name in st.session_state[COLUMNS_KEY]]
    return [spec for spec in specs if spec is not None]


def scalars_of(infos: Sequence[RunInfo]) -> dict[str, runcolumns.RunScalars]:
    """Run label -> its logged scalars (read once per version of its files)."""
    return dict(zip((info.label for info in infos),
                    runcolumns.SCALAR_CACHE.get_many([info.entry.path for info in infos])))


def with_columns(table: pd.DataFrame, infos: Sequence[RunInfo], specs: Sequence[runcolumns.ColumnSpec]
                 ) -> pd.DataFrame:
    """The table with the metric columns ``specs`` (runs read only when a column is asked for)."""
    return runtable.with_metric_columns(table, scalars_of(infos), specs) if specs else table


def filter_keys(columns: Sequence[str], infos: Sequence[RunInfo], conditions: Sequence[runfilter.Condition]
                ) -> list[str]:
    """The scalar names a filter may name: those of the runs' last lines, and every scalar the runs
    log (read then) when a condition names none of those nor a column."""
    keys = runtable.metric_keys(infos)
    if any(runfilter.resolve_column(condition.column, columns, keys) is None for condition in conditions):
        keys = sorted({*keys, *runcolumns.scalar_keys(list(scalars_of(infos).values()))})
    return keys


def apply_where(table: pd.DataFrame, infos: Sequence[RunInfo], text: str) -> tuple[pd.DataFrame, np.ndarray]:
    """(the table with the metric columns the filter names, the mask of the rows it keeps);
    raises :class:`apps.data.runfilter.FilterError`."""
    conditions = runfilter.parse_filter(text)
    if not conditions:
        return table, np.ones(len(table), dtype=bool)
    keys = filter_keys(list(table.columns), infos, conditions)
    table = with_columns(table, infos, runfilter.needed_columns(conditions, list(table.columns), keys))
    return table, runfilter.filter_mask(table, conditions, keys)


def evaluate_filter(infos: Sequence[RunInfo], grouping: Grouping, names: Mapping[str, str]
                    ) -> tuple[tuple[str, ...] | None, str | None]:
    """(labels of the runs that meet the Runs page's filter, in listing order, or None without a
    filter or with one that cannot be read; the reason it cannot be read, or None). Every config key
    can be named, whatever the producer shown. Kept for the last few (runs, filter) pairs."""
    text = where_text().strip()
    if not text:
        return None, None
    memo_key = (tuple(id(info) for info in infos), text, tuple(grouping.group_of.items()), tuple(names.items()))
    with _MEMO_LOCK:
        found = _MEMO.get(memo_key)
    if found is not None and all(a is b for a, b in zip(found[0], infos)):
        return found[1]
    table = runtable.run_table(infos, grouping, all_config=True, names=names)
    try:
        table, mask = apply_where(table, infos, text)
        result: tuple[tuple[str, ...] | None, str | None] = (tuple(str(label) for label in table["run"][mask]), None)
    except runfilter.FilterError as err:
        result = (None, str(err))
    with _MEMO_LOCK:
        if len(_MEMO) > 8:
            _MEMO.clear()
        _MEMO[memo_key] = (tuple(infos), result)
    return result


def filtered_runs(infos: Sequence[RunInfo], grouping: Grouping, names: Mapping[str, str]) -> tuple[str, ...] | None:
    """Labels of the runs that meet the Runs page's filter (:func:`evaluate_filter`); None without one."""
    return evaluate_filter(infos, grouping, names)[0]


def shown_picks(ticked: Sequence[str], filtered: Sequence[str] | None, damaged: Mapping[str, str]
                ) -> tuple[str, ...]:
    """The runs the views show: the ticked ones; with a filter, those of them it keeps, or (none
    kept) the first :data:`MAX_FILTERED_SHOWN` healthy runs it keeps."""
    if filtered is None:
        return tuple(ticked)
    kept = set(filtered)
    ticked_kept = tuple(label for label in ticked if label in kept)
    if ticked_kept:
        return ticked_kept
    return tuple(label for label in filtered if label not in damaged)[:MAX_FILTERED_SHOWN]


def follow_filter(picked: Sequence[str], filtered: Sequence[str] | None, run_key: str, baseline_key: str,
                  no_baseline: str) -> None:
    """With a filter, the Run of the per-run pages (and its baseline) among the runs shown: the first
    (and second) of ``picked`` when the current ones are not among them."""
    if filtered is None or not picked:
        return
    if st.session_state.get(run_key) not in picked:
        st.session_state[run_key] = picked[0]
    if st.session_state.get(baseline_key, no_baseline) not in (no_baseline, *picked):
        st.session_state[baseline_key] = picked[1] if len(picked) > 1 else no_baseline
