"""The Runs page's controls of the table as in W&B: metric columns (:func:`column_editor`), the
numeric filter (:func:`where_box`, :func:`filter_rows`), grouped rows (:func:`group_by`,
:func:`grouped_table`), and what ticking a row picks (:func:`on_pick`). The page itself:
``apps/views/runs.py``; the state every view follows: :mod:`apps.views.runstate`.
"""

from __future__ import annotations

import functools
from typing import Any

import pandas as pd
import streamlit as st

from apps.data import runcolumns, runfilter, runtable
from apps.views import runstate, ui
from apps.views.urlstate import url_sync

TABLE_KEY = "runs-table"
TABLE_HEIGHT_PX = 420
NO_GROUPS = "(no grouping)"
#: The statistics offered for a metric column, as the picker shows them.
STAT_NAMES = {"final": "final value", "best": "best (max, or min for a loss, error, gap, time)", "max": "max",
              "min": "min", "last": "mean of the last k values"}


def on_pick(table_key: str, members: tuple[tuple[str, ...], ...], damaged: tuple[str, ...]) -> None:
    """The table's selection changed: the picked runs are those of the rows ticked among the rows
    shown (a run, or a group's runs) plus those picked earlier and filtered out now; the Run of the
    per-run pages becomes the first healthy pick (a damaged one only when nothing else is picked)
    and the baseline the second."""
    state = st.session_state.get(table_key)
    rows = sorted(state["selection"]["rows"]) if state is not None else []
    shown = {label for row in members for label in row}
    picked = [label for label in st.session_state.get(ui.PICKED_KEY, ()) if label not in shown]
    picked += [label for row in rows if 0 <= row < len(members) for label in members[row]]
    st.session_state[ui.PICKED_KEY] = tuple(picked)
    ordered = [label for label in picked if label not in damaged] + [label for label in picked if label in damaged]
    if ordered:
        st.session_state[ui.RUN_KEY] = ordered[0]
        st.session_state[ui.BASELINE_KEY] = ordered[1] if len(ordered) > 1 else ui.NO_BASELINE


def filter_rows(rows: pd.DataFrame, infos: list[Any], specs: list[runcolumns.ColumnSpec], keys: list[str],
                chosen: ui.Selection) -> pd.DataFrame:
    """The rows with the metric columns added and those the filter names, and only the runs that meet
    the filter (:func:`apps.views.runstate.evaluate_filter`, which every view follows)."""
    text = runstate.where_text().strip()
    conditions: list[runfilter.Condition] = []
    if text:
        try:
            conditions = runfilter.parse_filter(text)
        except runfilter.FilterError:
            pass
    keys = runstate.filter_keys(list(rows.columns), infos, conditions) if conditions else keys
    named = runfilter.needed_columns(conditions, list(rows.columns), keys) if conditions else []
    listed = set(rows["run"])
    shown = [info for info in infos if info.label in listed]
    rows = runstate.with_columns(rows, shown, [*specs, *named])
    if not text:
        return rows
    filtered, error = runstate.evaluate_filter(infos, chosen.grouping, dict(chosen.names))
    if error is not None:
        st.error(f"Filter not applied: {error}", icon=":material/filter_alt_off:")
        return rows
    kept = rows[rows["run"].isin(set(filtered or ()))].reset_index(drop=True)
    ticked_kept = [label for label in chosen.ticked if label in set(filtered or ())]
    shown_text = ("the ticked runs that meet it" if ticked_kept else
                  f"the {len(chosen.picked)} healthy runs that meet it" +
                  (f" (the first {runstate.MAX_FILTERED_SHOWN})" if len(chosen.picked) == runstate.MAX_FILTERED_SHOWN
                   else ""))
    if not chosen.picked:
        shown_text = "its own default runs (no healthy run meets the filter)"
    st.caption(f":material/filter_alt: {len(filtered or ())} runs meet `{text}`: every view shows {shown_text}.")
    return kept


def value_columns(rows: pd.DataFrame) -> list[str]:
    """The numeric columns a grouped row aggregates: metric columns, then the step-0 ones."""
    metrics = [column for column in rows.columns if runcolumns.parse_column(str(column)) is not None]
    return metrics + [column for column in ("mean_success (last step)", runtable.TAIL_COLUMN) if column in rows]


def grouped_table(rows: pd.DataFrame, by: str, chosen: ui.Selection) -> None:
    """One row per group with its runs' mean and (3 or more values) 95% interval per numeric column;
    ticking a group picks its runs."""
    values = value_columns(rows)
    damaged = rows["run"].isin(list(chosen.damaged))
    grouped = runfilter.group_table(rows[~damaged].reset_index(drop=True), by, values)
    shown = pd.DataFrame({by: grouped[by], "n": grouped["n"]})
    for column in values:
        shown[column] = grouped[column]
        shown[f"{column} 95% interval"] = [f"[{lo:.4g}, {hi:.4g}]" if pd.notna(lo) else ""
                                           for lo, hi in zip(grouped[f"{column} lo"], grouped[f"{column} hi"])]
    members = tuple(tuple(str(label) for label in runs) for runs in grouped["runs"])
    ticked = set(chosen.ticked)
    key = f"{TABLE_KEY}-groups-{abs(hash((by, members))) % 10**8}"
    st.caption(f"{len(grouped)} groups by **{by}**: mean over each group's runs, n runs; the 95% interval "
               f"(Student t) only for groups with {runfilter.MIN_INTERVAL_SEEDS} or more values. Tick a group to "
               "pick its runs." + (f" {int(damaged.sum())} damaged run{'s' * (int(damaged.sum()) != 1)} left out."
                                   if damaged.any() else ""))
    st.dataframe(shown, hide_index=True, width="stretch", key=key,
                 height=TABLE_HEIGHT_PX if len(shown) > 10 else "auto",
                 on_select=functools.partial(on_pick, key, members, tuple(chosen.damaged)), selection_mode="multi-row",
                 selection_default={"selection": {"rows": [i for i, runs in enumerate(members)
                                                           if runs and set(runs) <= ticked]}},
                 column_config={column: st.column_config.NumberColumn(format="%.4g") for column in values})


def column_editor(keys: list[str]) -> list[runcolumns.ColumnSpec]:
    """Metric columns: add any logged scalar's final, best, max, min or mean of the last k values;
    the columns added (kept in the URL as ``cols``)."""
    specs = runstate.column_specs()
    with st.expander(f"Metric columns ({len(specs)})", icon=":material/view_column:"):
        key_box, stat_box, k_box, add_box = st.columns([3, 3, 1, 1], vertical_alignment="bottom")
        key = key_box.selectbox("Logged scalar", keys, index=None, key="runs-col-key",
                                placeholder="a step scalar or an evaluation metric")
        stats: list[str] = list(STAT_NAMES)
        stat = stat_box.selectbox("Value", stats, format_func=lambda name: STAT_NAMES[name], key="runs-col-stat")
        k = int(k_box.number_input("k", min_value=1, value=5, step=1, key="runs-col-k", disabled=stat != "last",
                                   help="The mean of the last k logged values (steps or evaluations)."))
        if add_box.button("Add", key="runs-col-add", icon=":material/add:", disabled=key is None) and key:
            spec = runcolumns.ColumnSpec(key, str(stat), k if stat == "last" else 1)
            specs = [*[old for old in specs if old != spec], spec]
            st.session_state[runstate.COLUMNS_KEY] = [old.name for old in specs]
        if specs:
            names = [spec.name for spec in specs]
            kept = st.multiselect("Columns added", names, default=names, key=f"runs-cols-{abs(hash(tuple(names)))}",
                                  help="Remove a column with its ×.")
            if list(kept) != names:
                st.session_state[runstate.COLUMNS_KEY] = list(kept)
                specs = [spec for spec in specs if spec.name in kept]
    url_sync(runstate.COLUMNS_KEY, [spec.name for spec in specs], [])
    return specs


def where_box(where: Any) -> None:
    """The numeric filter (kept in the URL as ``where``); its error in one line."""
    if "runs-where-input" not in st.session_state:
        st.session_state["runs-where-input"] = runstate.where_text()

    def changed() -> None:
        st.session_state[runstate.WHERE_KEY] = str(st.session_state.get("runs-where-input", "")).strip()

    where.text_input("Filter runs where", key="runs-where-input", on_change=changed,
                     placeholder="e.g. test/accuracy (final) > 0.6 and 0.5 <= config.lr < 2",
                     help="Conditions on columns, joined by `and` or `,`: `>`, `>=`, `<`, `<=`, `==`, `!=`, or a "
                          "range `LOW < COLUMN <= HIGH`. A logged scalar's name alone is its final value. Every "
                          "view then shows the runs that meet it.")


def group_by(rows: pd.DataFrame, where: Any) -> str | None:
    """"Group rows by": none, the app's groups, method, study, producer, or any config column."""
    options = [NO_GROUPS, *[column for column in ("group", "method", "study", "producer") if column in rows],
               *[column for column in rows.columns if str(column).startswith("config.")]]
    if st.session_state.get("runs-group-by") not in options:
        st.session_state["runs-group-by"] = NO_GROUPS
    chosen = where.selectbox("Group rows by", options, key="runs-group-by", bind="query-params",
                             help="One row per group: n runs, the mean of each metric column and, for groups of "
                                  "3 or more runs, its 95% interval.")
    return None if chosen in (None, NO_GROUPS) else str(chosen)
