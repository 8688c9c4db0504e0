"""Compare: two or more runs overlaid (e.g. GRPO vs Prompt-GDRO vs Rollout-GDRO from one study).

Any logged scalar and any evaluation metric, one line per run or, with "Group seeds", one mean line
per group with its 95% band, plus a table of final values and tail averages. Detail:
docs/app-notes.md#apps-views-compare.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from apps.data import curriculum, realrun, results, study
from apps.views import ui, uicharts
from gdro_lab.runformat.runlog import RunData

TITLE = "Compare"
MAX_DEFAULT_RUNS = 4


def _default_labels(chosen: ui.Selection) -> list[str]:
    """The runs picked on the Runs page; else the run and its baseline, then other healthy runs,
    up to MAX_DEFAULT_RUNS (a damaged run only when picked)."""
    if chosen.picked:
        return list(chosen.picked)
    labels = [entry.label for _, entry in chosen.shown]
    labels += chosen.healthy([entry.label for entry in chosen.entries if entry.label not in labels])
    return labels[:MAX_DEFAULT_RUNS]


def _named(frame: pd.DataFrame, names: dict[str, str]) -> pd.DataFrame:
    """A frame's ``run`` column with people's names instead of folder labels."""
    return frame.assign(run=frame["run"].map(names)) if not frame.empty else frame


def _clocked(items: list[uicharts.Series], runs: dict[str, RunData], names: dict[str, str]) -> list[uicharts.Series]:
    """Per-run charts on the wall clock (when asked): each run's steps to its own elapsed time, on
    one range for every run (:func:`apps.views.uicharts.on_wall_clock`)."""
    if not ui.wall_clock():
        return items
    clocks = {}
    for label, run in runs.items():
        seconds = realrun.elapsed_seconds(run)
        if seconds is None:
            st.caption(f"**{names[label]}** logs no step times (`time/step`): left out of the wall-clock charts.")
        else:
            clocks[names[label]] = (run.steps.astype(float), seconds)
    return [uicharts.on_wall_clock(item, clocks, run_field="run") for item in items]


def _ranking(runs: dict[str, RunData], chosen: ui.Selection, metrics: list[str]) -> dict[str, Any]:
    """Which groups a chart keeps apart when there are more than the sidebar's k: the groups by
    their runs' mean final value of the first metric (:func:`apps.views.uicharts.rank_by_final`)."""
    if not metrics:
        return {}
    members: dict[str, list[RunData]] = {}
    for label, run in runs.items():
        members.setdefault(chosen.grouping.group_of.get(label, chosen.name(label)), []).append(run)
    if len(members) <= uicharts.top_groups():
        return {}
    return {"rank": uicharts.rank_by_final(members, metrics[0]), "ranked_by": f"final {metrics[0]}"}


def _aggregate_pickers() -> tuple[str, str]:
    """The centre of a group's line and its interval (the interval's options follow the centre)."""
    left, right = st.columns(2)
    centre = left.selectbox("Group line", study.CENTRES, index=0, key="compare-centre", bind="query-params",
                            help="The mean or the median over a group's seeds at each step.")
    options = study.INTERVALS[str(centre)]
    if st.session_state.get("compare-interval") not in options:
        st.session_state["compare-interval"] = options[0]
    interval = right.selectbox("Band", options, key="compare-interval", bind="query-params",
                               help=f"Drawn for groups of at least {study.MIN_BAND_SEEDS} seeds.")
    return str(centre), str(interval)


def _run_items(runs: dict[str, RunData], names: dict[str, str], metrics: list[str], chosen: ui.Selection
               ) -> list[uicharts.Series]:
    """One line per run for each metric, a legend per run (or per group / method at many runs),
    one chart per producer."""
    colours = {names[label]: colour for label, colour in ui.run_colours(list(runs)).items()}
    group_of = {names[label]: chosen.grouping.group_of.get(label, names[label]) for label in runs}
    method_of = {names[label]: chosen.grouping.method_of.get(label, "") for label in runs}
    producer_of = {names[label]: chosen.producer(label) for label in runs}
    legend = uicharts.legend_for(list(group_of), group_of, method_of, **_ranking(runs, chosen, metrics))
    values = list(runs.values())
    items = []
    for metric in metrics:
        frame = _named(results.compare_frame(runs, metric), names)
        item = uicharts.Series(frame, metric, metric, color_field="run", zero_rule=metric == "lead_lag_gap",
                               bounds=uicharts.bounds_for(metric, values, frame), colours=colours, legend=legend)
        items += uicharts.split_by_producer(item, producer_of, "run")
    return _clocked(items, runs, names)


def _group_items(groups: list[study.Method], metrics: list[str], runs: dict[str, RunData], chosen: ui.Selection,
                 centre: str, interval: str) -> list[uicharts.Series]:
    """One line per group (its centre over seeds, its band) for each metric, one chart per producer."""
    colours = ui.group_colours()
    labels = [group.label for group in groups]
    methods = {group.label: chosen.grouping.method_of.get(group.runs[0][0], "") for group in groups}
    producer_of = {group.label: chosen.producer(group.runs[0][0]) for group in groups}
    legend = uicharts.legend_for(labels, {label: label for label in labels}, methods, **_ranking(runs, chosen, metrics))
    values = list(runs.values())
    items = []
    for metric in metrics:
        frame = study.band_frame(groups, metric, centre, interval)
        item = uicharts.Series(frame, metric, metric, color_field="method", zero_rule=metric == "lead_lag_gap",
                               bounds=uicharts.bounds_for(metric, values, frame), colours=colours, legend=legend)
        items += uicharts.split_by_producer(item, producer_of, "method")
    return items


def _evaluations(runs: dict[str, RunData], names: dict[str, str], chosen: ui.Selection,
                 box: Any) -> list[uicharts.Series]:
    """The chart of one evaluation metric over steps (picked in ``box``), one line per run, with its
    interval as a band when logged: drawn with the page's other charts, so that a legend click fades
    it too."""
    frames = {label: results.evals_frame(run) for label, run in runs.items()}
    metrics = results.headline_metrics(name for frame in frames.values() for name in frame["metric"].unique())
    if not metrics:
        box.caption("None of these runs has evaluation results.")
        return []
    metric = box.selectbox("Evaluation metric", metrics, key="compare-eval-metric", bind="query-params")
    frame = results.bounds_by_run(frames, metric, names)
    colours = {names[label]: colour for label, colour in ui.run_colours(list(runs)).items()}
    group_of = {names[label]: chosen.grouping.group_of.get(label, names[label]) for label in runs}
    method_of = {names[label]: chosen.grouping.method_of.get(label, "") for label in runs}
    drawn = set(frame["run"].unique())
    shown = [name for name in group_of if name in drawn]
    item = uicharts.Series(frame, f"Evaluation: {metric}", metric, color_field="run", smooth=False,
                           bounds=uicharts.bounds_for(metric, list(runs.values()), frame), colours=colours,
                           legend=uicharts.legend_for(shown, group_of, method_of, **_ranking(runs, chosen, [metric])))
    items = uicharts.split_by_producer(item, {names[label]: chosen.producer(label) for label in runs}, "run")
    return _clocked(items, runs, names)


def page() -> None:
    """Pick runs and metrics; draw one overlay chart per metric (linked)."""
    chosen = ui.selection()
    st.title(TITLE)
    st.caption("Runs overlaid on the same axes: the runs picked on the Runs page, or pick them here. Click a legend "
               "entry to isolate it (shift-click adds one), hover a line to name it; drag or scroll to zoom.")
    if not chosen.entries:
        ui.no_runs_message(chosen)
        return
    by_label = {entry.label: entry for entry in chosen.entries}
    labels = ui.runs_picker(chosen, by_label, "compare-runs", _default_labels(chosen),
                            "Pick runs here, or tick them in the Runs page's table.")

    def body() -> None:
        runs = dict(ui.iter_loaded([by_label[label] for label in labels]))
        if len(runs) < 2:
            st.info("Pick at least two runs that can be read to compare them.", icon=":material/info:")
            if not runs:
                return
        names = _unique_names(chosen, list(runs))
        metrics_list = results.scalar_names(runs.values())
        if "lead_lag_gap" not in metrics_list and any(not curriculum.lead_lag_frame(r).empty for r in runs.values()):
            metrics_list.insert(0, "lead_lag_gap")
        defaults = [name for name in results.COMPARE_DEFAULTS if name in metrics_list]
        picked, evaluation, grouping = st.columns([3, 2, 1.4])
        metrics = picked.multiselect("Metrics", metrics_list, default=defaults or metrics_list[:3],
                                     key="compare-metrics", bind="query-params")
        grouped = grouping.toggle("Group seeds", value=False, key="compare-group", bind="query-params",
                                  help="One line per group (runs that differ only in their seed) with its band.")
        groups: list[study.Method] = []
        if grouped:
            centre, interval = _aggregate_pickers()
            groups = study.group_runs(runs, chosen.grouping)
            items = _group_items(groups, metrics, runs, chosen, centre, interval)
            st.caption(study.band_note(groups, centre, interval))
            if ui.wall_clock():
                st.caption("Groups are drawn against steps (their seeds' clocks differ).")
        else:
            items = _run_items(runs, names, metrics, chosen)
        uicharts.linked_series(items, columns=2, key="compare-charts", export="compare",
                               below=_evaluations(runs, names, chosen, evaluation))
        if metrics and grouped:
            st.caption("Final results per group: mean [95% interval] over seeds")
            table = study.final_table(groups, metrics)
            st.dataframe(table[[c for c in table.columns if not c.endswith((" mean", " lo", " hi"))]],
                         hide_index=True, width="stretch")
        elif metrics:
            st.caption("Final value and tail average (steps at or after the 60th percentile) per run")
            table = results.compare_table(runs, metrics)
            st.dataframe(table.assign(run=table["run"].map(names)), hide_index=True, width="stretch")

    ui.live_fragment(body, chosen)()


def _unique_names(chosen: ui.Selection, labels: list[str]) -> dict[str, str]:
    """People's names of the runs, with the folder added where two runs would share one."""
    names = {label: chosen.name(label) for label in labels}
    counts = pd.Series(list(names.values())).value_counts()
    return {label: name if counts[name] == 1 else f"{name} ({label})" for label, name in names.items()}


page()
