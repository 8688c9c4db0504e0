"""Runs: every run in one interactive table that picks the runs every other view shows.

One row per run from its small files (:mod:`apps.data.listing`); ticked rows are what Compare and
Study show, the first healthy one the Run and the second its baseline; picks stay in the URL
(``pick``). Also: unreadable folders, pins (:mod:`apps.data.pins`) and a config diff. Detail:
docs/app-notes.md#apps-views-runs.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Literal, Sequence

import pandas as pd
import streamlit as st

from apps.data import listing, pins, runcolumns, runfilter, runtable, study
from apps.views import runstate, ui
from apps.views.urlstate import url_sync

TITLE = "Runs"
TABLE_KEY = "runs-table"
#: Columns first in the table (the rest follow in :func:`apps.data.runtable.run_table`'s order).
FIRST_COLUMNS = ("name", "status", "damage", "study", "method", "seed", "last step", "mean_success (last step)",
                 runtable.TAIL_COLUMN, "tags")
ALL_PRODUCERS = "every producer"
TABLE_HEIGHT_PX = 420
NO_GROUPS = "(no grouping)"
#: The statistics offered for a metric column, as the picker shows them.
STAT_NAMES = {"final": "final value", "best": "best (max, or min for a loss, error, gap, time)", "max": "max",
              "min": "min", "last": "mean of the last k values"}


def _problems(chosen: ui.Selection) -> None:
    """The run folders that cannot be read, each with its one-line reason."""
    if not chosen.problems:
        return
    count = len(chosen.problems)
    st.warning(f"{count} run folder{'s' * (count != 1)} under `{chosen.root}` cannot be read and "
               f"{'are' if count != 1 else 'is'} not listed above:", icon=":material/warning:")
    st.markdown(runtable.markdown_table(runtable.problem_table(chosen.problems)))  # long reasons wrap


@st.cache_data(ttl=5, max_entries=8, show_spinner=False)
def _empty_folders(root_text: str) -> list[str]:
    """Empty folders under the runs folder (relative to it), searched again at most every 5 s."""
    root = Path(root_text)
    return [folder.relative_to(root).as_posix() for folder in listing.empty_folders(root)] if root.is_dir() else []


def _empty(chosen: ui.Selection) -> None:
    """The empty folders under the runs folder, named: a run that was to be written there, not lost."""
    empty = _empty_folders(str(chosen.root))
    if not empty:
        return
    listed = ", ".join(f"`{folder}`" for folder in empty[:10]) + (f" and {len(empty) - 10} more" if len(empty) > 10
                                                                   else "")
    st.info(f"{len(empty)} empty folder{'s' * (len(empty) != 1)} under `{chosen.root}`, with no run written yet: "
            f"{listed}.", icon=":material/folder_off:")


def _on_pick(table_key: str, members: tuple[tuple[str, ...], ...], damaged: tuple[str, ...]) -> None:
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


def _producer_picker(producers: list[str], where: Any) -> str | None:
    """The producer whose runs (and config columns) the table shows; None: every producer."""
    options = [ALL_PRODUCERS, *producers] if len(producers) > 1 else producers
    if not options:
        return None
    chosen = where.selectbox("Producer", options, index=0, key="runs-producer", bind="query-params",
                             help="Every producer's runs, or one producer's runs with its config keys as columns "
                                  "(simulator and trainer configs share almost no key).")
    return None if chosen in (None, ALL_PRODUCERS) else str(chosen)


def _row_filters(table: pd.DataFrame, producer: str | None, key_box: Any, value_box: Any, search_box: Any
                 ) -> pd.DataFrame:
    """A config-value filter and a search over the producer's runs; returns the rows shown."""
    config_columns = [column[len("config."):] for column in table.columns if column.startswith("config.")]
    key = key_box.selectbox("Filter by config key", config_columns, index=None, key="runs-filter-key",
                            placeholder="any config", help="Keep the runs whose config has one of the chosen values.")
    values: list[str] = []
    if key:
        distinct = sorted({str(value) for value in table[f"config.{key}"].dropna()}, key=_natural)
        values = value_box.multiselect(f"Values of {key}", distinct, default=[], key=f"runs-filter-{key}")
    text = search_box.text_input("Search runs", key="runs-search", placeholder="words in any cell, e.g. lr×1 keep",
                                 bind="query-params")
    return runtable.filter_table(table, None if producer is None else [producer], key, values, text)


def _filtered(rows: pd.DataFrame, infos: list[Any], specs: list[runcolumns.ColumnSpec], keys: list[str],
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


def _natural(text: str) -> tuple[int, float, str]:
    try:
        return (0, float(text), text)
    except ValueError:
        return (1, 0.0, text)


def _table(rows: pd.DataFrame, chosen: ui.Selection) -> None:
    """The interactive table; ticking rows picks runs (:func:`_on_pick`)."""
    labels = tuple(str(label) for label in rows["run"])
    ticked = set(chosen.ticked)
    key = f"{TABLE_KEY}-{abs(hash(labels)) % 10**8}"  # a new filter: a new table, ticked as picked
    metrics = [column for column in rows.columns if runcolumns.parse_column(str(column)) is not None]
    first = [column for column in FIRST_COLUMNS if column in rows and column != "tags"] + metrics + ["tags"]
    order = first + [column for column in rows.columns if column not in first]
    height: int | Literal["auto"] = TABLE_HEIGHT_PX if len(rows) > 10 else "auto"
    members = tuple((label,) for label in labels)
    st.dataframe(rows, hide_index=True, width="stretch", height=height, key=key, column_order=order,
                 on_select=functools.partial(_on_pick, key, members, tuple(chosen.damaged)), selection_mode="multi-row",
                 selection_default={"selection": {"rows": [i for i, label in enumerate(labels) if label in ticked]}},
                 placeholder="", column_config=_column_config(rows))


def _value_columns(rows: pd.DataFrame) -> list[str]:
    """The numeric columns a grouped row aggregates: metric columns, then the step-0 ones."""
    metrics = [column for column in rows.columns if runcolumns.parse_column(str(column)) is not None]
    return metrics + [column for column in ("mean_success (last step)", runtable.TAIL_COLUMN) if column in rows]


def _grouped_table(rows: pd.DataFrame, by: str, chosen: ui.Selection) -> None:
    """One row per group with its runs' mean and (3 or more values) 95% interval per numeric column;
    ticking a group picks its runs."""
    values = _value_columns(rows)
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
                 on_select=functools.partial(_on_pick, key, members, tuple(chosen.damaged)), selection_mode="multi-row",
                 selection_default={"selection": {"rows": [i for i, runs in enumerate(members)
                                                           if runs and set(runs) <= ticked]}},
                 column_config={column: st.column_config.NumberColumn(format="%.4g") for column in values})


def _column_editor(keys: list[str]) -> list[runcolumns.ColumnSpec]:
    """Metric columns: add any logged scalar's final, best, max, min or mean of the last k values;
    the columns added (kept in the URL as ``cols``)."""
    specs = runstate.column_specs()
    with st.expander(f"Metric columns ({len(specs)})", icon=":material/view_column:"):
        key_box, stat_box, k_box, add_box = st.columns([3, 3, 1, 1], vertical_alignment="bottom")
        key = key_box.selectbox("Logged scalar", keys, index=None, key="runs-col-key",
                                placeholder="a step scalar or an evaluation metric")
        stat = stat_box.selectbox("Value", list(STAT_NAMES), format_func=STAT_NAMES.get, key="runs-col-stat")
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


def _where_box(where: Any, chosen: ui.Selection) -> None:
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


def _group_by(rows: pd.DataFrame, where: Any) -> str | None:
    """"Group rows by": none, the app's groups, method, study, producer, or any config column."""
    options = [NO_GROUPS, *[column for column in ("group", "method", "study", "producer") if column in rows],
               *[column for column in rows.columns if str(column).startswith("config.")]]
    if st.session_state.get("runs-group-by") not in options:
        st.session_state["runs-group-by"] = NO_GROUPS
    chosen = where.selectbox("Group rows by", options, key="runs-group-by", bind="query-params",
                             help="One row per group: n runs, the mean of each metric column and, for groups of "
                                  "3 or more runs, its 95% interval.")
    return None if chosen in (None, NO_GROUPS) else str(chosen)


def _column_config(rows: pd.DataFrame) -> dict[str, Any]:
    config: dict[str, Any] = {
        "name": st.column_config.TextColumn("name", pinned=True, help="Named by the config keys that differ within "
                                            "its study (or the name you pinned); ⚠ damaged: see the damage column"),
        "damage": st.column_config.TextColumn("damage", help="Why the run's files look damaged: a finished run that "
                                              "stops before its configured steps, or a cut last line"),
        "mean_success (last step)": st.column_config.NumberColumn(format="%.4g"),
        "run": st.column_config.TextColumn("folder")}
    for column in rows.columns:
        if column == runtable.TAIL_COLUMN or runcolumns.parse_column(str(column)) is not None:
            config[column] = st.column_config.NumberColumn(format="%.4g")
    return config


def _picked_caption(chosen: ui.Selection) -> None:
    if not chosen.picked:
        st.caption("Tick rows to pick runs: Compare and Study show the picked runs, and the first is the Run of "
                   "the per-run pages (the second its baseline).")
        return
    names = ", ".join(f"**{chosen.name(label)}**" for label in chosen.picked[:6])
    more = f" and {len(chosen.picked) - 6} more" if len(chosen.picked) > 6 else ""
    st.caption(f"{len(chosen.picked)} picked: {names}{more}. Compare and Study show them; the per-run pages "
               "show the first (and the second as baseline).")


def _damaged(chosen: ui.Selection) -> None:
    if not chosen.damaged:
        return
    lines = "; ".join(f"**{chosen.names.get(label, label)}** (`{label}`): {why}" for label, why in chosen.damaged.items())
    st.warning(f"{len(chosen.damaged)} run{'s' * (len(chosen.damaged) != 1)} look{'s' * (len(chosen.damaged) == 1)} "
               f"damaged and {'are' if len(chosen.damaged) != 1 else 'is'} never shown unless picked: {lines}",
               icon=":material/warning:")


def _pin_editor(chosen: ui.Selection, infos: Sequence[Any]) -> None:
    """Pin a display name and tags to a picked run (stored beside the app: :mod:`apps.data.pins`)."""
    with st.expander("Name or tag a picked run", icon=":material/sell:"):
        if not chosen.picked:
            st.caption("Pick a run in the table first.")
            return
        by_label = {info.label: info for info in infos}
        label = st.selectbox("Run", list(chosen.picked), key="pin-run", format_func=chosen.name)
        if label not in by_label:
            return
        current = pins.load_pins(pins.pins_path()).get(pins.pin_key(by_label[label].entry.path), pins.Pin())
        name = st.text_input("Display name (empty: the automatic name)", value=current.name, key=f"pin-name-{label}")
        tags = st.text_input("Tags (comma-separated)", value=", ".join(current.tags), key=f"pin-tags-{label}")
        st.caption(f"Saved in `{pins.pins_path()}`, never in the run folder.")
        if st.button("Save", key="pin-save", icon=":material/save:"):
            try:
                pins.save_pin(pins.pins_path(), by_label[label].entry.path, pins.Pin(name.strip(), pins.tags_from_text(tags)))
            except pins.PinError as err:
                st.error(str(err), icon=":material/error:")
                return
            st.rerun()


def _diff(chosen: ui.Selection, infos: Sequence[Any]) -> None:
    configs = {info.label: info.config for info in infos}
    labels = list(configs)
    if len(labels) < 2:
        return
    st.subheader("Config diff")
    first_two = chosen.healthy([label for label in chosen.picked if label in configs])[:2]
    rest = [label for label in labels if label not in first_two]
    defaults = first_two + chosen.healthy(rest) + [label for label in rest if label in chosen.damaged]
    left, right = st.columns(2)
    first = left.selectbox("Run A", labels, index=labels.index(defaults[0]), key="diff-a", format_func=chosen.name)
    second = right.selectbox("Run B", labels, index=labels.index(defaults[1]), key="diff-b", format_func=chosen.name)
    if first == second:
        st.info("Pick two different runs.", icon=":material/info:")
        return
    diff = runtable.config_diff(configs[first], configs[second], (first, second))
    if diff.empty:
        st.success("The two configs are identical.", icon=":material/check_circle:")
    else:
        st.caption(f"{len(diff)} key differs" if len(diff) == 1 else f"{len(diff)} keys differ")
        st.dataframe(diff, hide_index=True, width="stretch", key="runs-diff")


def page() -> None:
    """The run table (filters, picks), damaged and unreadable runs, pins, then a config diff."""
    chosen = ui.selection()
    st.title(TITLE)
    st.caption("Every run found, named by the config keys that differ within its study. Sort by a column header, "
               "filter, and tick rows to pick the runs the other views show.")
    if not chosen.entries:
        ui.no_runs_message(chosen)
        _problems(chosen)
        _empty(chosen)
        return

    def body() -> None:
        if tuple(st.session_state.get(ui.PICKED_KEY, ())) != chosen.ticked or runstate.where_text() != chosen.where:
            st.rerun(scope="app")  # the table or the filter (in this fragment) changed: every view follows
        infos = [info for info in chosen.infos if info.problem is None]
        with_tails = st.toggle("Tail averages", value=False, key="runs-tails", bind="query-params",
                               help="Mean success over the last 40% of each run's steps: reads every run's steps "
                                    "(slower on a large runs folder).")
        tails = None
        if with_tails:
            loaded = dict(ui.iter_loaded([info.entry for info in infos]))
            tails = {label: study.final_value(run, "mean_success") for label, run in loaded.items()}
        producer_box, search_box, key_box, value_box = st.columns([2, 3, 2, 2])
        producer = _producer_picker(runtable.producers(infos), producer_box)
        where_box, group_box = st.columns([6, 3])
        _where_box(where_box, chosen)
        keys = runtable.metric_keys(infos)
        specs = _column_editor(keys)
        names = {info.label: chosen.name(info.label) for info in infos}
        table = runtable.run_table(infos, chosen.grouping, tails=tails, names=names, producer=producer,
                                   tags=chosen.tags)
        rows = _row_filters(table, producer, key_box, value_box, search_box)
        rows = _filtered(rows, infos, specs, keys, chosen)
        by = _group_by(rows, group_box)
        _damaged(chosen)
        st.caption(f"{len(rows)} of {len(infos)} runs shown")
        if by is None:
            _table(rows, chosen)
        else:
            _grouped_table(rows, by, chosen)
        _picked_caption(chosen)
        _problems(chosen)
        _empty(chosen)
        _pin_editor(chosen, infos)
        _diff(chosen, infos)

    ui.live_fragment(body, chosen)()


page()
