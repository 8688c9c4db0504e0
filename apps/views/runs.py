"""Runs: every run in one interactive table that picks the runs every other view shows.

One row per run from its small files (:mod:`apps.data.listing`); ticked rows are what Compare and
Study show, the first healthy one the Run and the second its baseline; picks stay in the URL
(``pick``). Metric columns, the numeric filter that every view follows, and grouped rows:
:mod:`apps.views.runcontrols`. Also: unreadable and empty folders, pins (:mod:`apps.data.pins`) and a
config diff. Detail: docs/app-notes.md#apps-views-runs.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Literal, Sequence

import pandas as pd
import streamlit as st

from apps.data import listing, pins, runcolumns, runtable, study
from apps.views import runcontrols, runstate, ui

TITLE = "Runs"
#: Columns first in the table (the rest follow in :func:`apps.data.runtable.run_table`'s order).
FIRST_COLUMNS = ("name", "status", "damage", "study", "method", "seed", "last step", "mean_success (last step)",
                 runtable.TAIL_COLUMN, "tags")
ALL_PRODUCERS = "every producer"


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


def _natural(text: str) -> tuple[int, float, str]:
    try:
        return (0, float(text), text)
    except ValueError:
        return (1, 0.0, text)


def _table(rows: pd.DataFrame, chosen: ui.Selection) -> None:
    """The interactive table; ticking rows picks runs (:func:`apps.views.runcontrols.on_pick`)."""
    labels = tuple(str(label) for label in rows["run"])
    ticked = set(chosen.ticked)
    key = f"{runcontrols.TABLE_KEY}-{abs(hash(labels)) % 10**8}"  # a new filter: a new table, ticked as picked
    metrics = [column for column in rows.columns if runcolumns.parse_column(str(column)) is not None]
    first = [column for column in FIRST_COLUMNS if column in rows and column != "tags"] + metrics + ["tags"]
    order = first + [column for column in rows.columns if column not in first]
    height: int | Literal["auto"] = runcontrols.TABLE_HEIGHT_PX if len(rows) > 10 else "auto"
    members = tuple((label,) for label in labels)
    st.dataframe(rows, hide_index=True, width="stretch", height=height, key=key, column_order=order,
                 on_select=functools.partial(runcontrols.on_pick, key, members, tuple(chosen.damaged)), selection_mode="multi-row",
                 selection_default={"selection": {"rows": [i for i, label in enumerate(labels) if label in ticked]}},
                 placeholder="", column_config=_column_config(rows))


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
        runcontrols.where_box(where_box)
        keys = runtable.metric_keys(infos)
        if runstate.column_specs():  # the runs were read for a column: offer every scalar they log
            keys = sorted({*keys, *runcolumns.scalar_keys(list(runstate.scalars_of(infos).values()))})
        specs = runcontrols.column_editor(keys)
        names = {info.label: chosen.name(info.label) for info in infos}
        table = runtable.run_table(infos, chosen.grouping, tails=tails, names=names, producer=producer,
                                   tags=chosen.tags)
        rows = _row_filters(table, producer, key_box, value_box, search_box)
        rows = runcontrols.filter_rows(rows, infos, specs, keys, chosen)
        by = runcontrols.group_by(rows, group_box)
        _damaged(chosen)
        st.caption(f"{len(rows)} of {len(infos)} runs shown")
        if by is None:
            _table(rows, chosen)
        else:
            runcontrols.grouped_table(rows, by, chosen)
        _picked_caption(chosen)
        _problems(chosen)
        _empty(chosen)
        _pin_editor(chosen, infos)
        _diff(chosen, infos)

    ui.live_fragment(body, chosen)()


page()
