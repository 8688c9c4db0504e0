"""Compare: two or more runs overlaid (e.g. GRPO vs Prompt-GDRO vs Rollout-GDRO from one study).

Any logged scalar (the lead-lag gap recomputed by Eq. 32) and any evaluation metric, one line
per run — or, with "Group seeds", one mean line per group with its 95% band over seeds (as on
the Study page) — plus a table of final values and tail averages (steps at or after the 60th
percentile). Charts are linked: zoom and crosshair act on all of them. Runs are named and
coloured as everywhere (:mod:`apps.identity`); the wall-clock axis applies to ungrouped runs.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from apps import data, realrun, study, ui, uicharts
from gdro_lab.runlog import RunData

TITLE = "Compare"
MAX_DEFAULT_RUNS = 4


def _default_labels(chosen: ui.Selection) -> list[str]:
    """The run and its baseline first, then other listed runs, up to MAX_DEFAULT_RUNS."""
    labels = [entry.label for _, entry in chosen.shown]
    labels += [entry.label for entry in chosen.entries if entry.label not in labels]
    return labels[:MAX_DEFAULT_RUNS]


def _named(frame: pd.DataFrame, names: dict[str, str]) -> pd.DataFrame:
    """A frame's ``run`` column with people's names instead of folder labels."""
    return frame.assign(run=frame["run"].map(names)) if not frame.empty else frame


def _clocked(items: list[uicharts.Series], runs: dict[str, RunData], names: dict[str, str]) -> list[uicharts.Series]:
    """Per-run charts on the wall clock (when asked): each run's steps to its own hours."""
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


def _evaluations(runs: dict[str, RunData], names: dict[str, str], colours: dict[str, str]) -> None:
    """One evaluation metric over steps, one line per run, with its interval as a band when logged."""
    frames = {label: data.evals_frame(run) for label, run in runs.items()}
    metrics = data.headline_metrics(name for frame in frames.values() for name in frame["metric"])
    if not metrics:
        st.info("None of these runs has evaluation results.", icon=":material/info:")
        return
    metric = st.selectbox("Evaluation metric", metrics, key="compare-eval-metric", bind="query-params")
    parts = [data.with_bounds(frame, [metric], series="run").assign(run=names[label])
             for label, frame in frames.items()]
    frame = pd.concat(parts, ignore_index=True)
    item = uicharts.Series(frame, f"Evaluation: {metric}", metric, color_field="run", smooth=False,
                           bounds=uicharts.bounds_for(metric, list(runs.values()), frame), colours=colours)
    uicharts.linked_series(_clocked([item], runs, names), key="compare-eval-charts", export="compare-evaluation")


def page() -> None:
    """Pick runs and metrics; draw one overlay chart per metric (linked)."""
    chosen = ui.selection()
    st.title(TITLE)
    st.caption("Runs overlaid on the same axes: pick two or more, e.g. GRPO, Prompt-GDRO and Rollout-GDRO "
               "of one study. Drag or scroll a chart to zoom all of them; hover for every run's value.")
    if not chosen.entries:
        ui.no_runs_message(chosen)
        return
    by_label = {entry.label: entry for entry in chosen.entries}
    unknown = ui.url_seed("compare-runs", list(by_label), multiple=True)
    if unknown:
        st.warning("The URL names runs that are not listed: " + ", ".join(f"**{label}**" for label in unknown),
                   icon=":material/link_off:")
    default = None if "compare-runs" in st.session_state else _default_labels(chosen)
    labels = st.multiselect("Runs", list(by_label), default=default, key="compare-runs", format_func=chosen.name)
    ui.url_sync("compare-runs", labels, _default_labels(chosen))

    def body() -> None:
        runs = dict(ui.iter_loaded([by_label[label] for label in labels]))
        if len(runs) < 2:
            st.info("Pick at least two runs that can be read to compare them.", icon=":material/info:")
            if not runs:
                return
        names = _unique_names(chosen, list(runs))
        metrics_list = data.scalar_names(runs.values())
        if "lead_lag_gap" not in metrics_list and any(not data.lead_lag_frame(r).empty for r in runs.values()):
            metrics_list.insert(0, "lead_lag_gap")
        defaults = [name for name in data.COMPARE_DEFAULTS if name in metrics_list]
        picked, grouping = st.columns([4, 1])
        metrics = picked.multiselect("Metrics", metrics_list, default=defaults or metrics_list[:3],
                                     key="compare-metrics", bind="query-params")
        grouped = grouping.toggle("Group seeds", value=False, key="compare-group", bind="query-params",
                                  help="One mean line per group (runs that differ only in their seed) with its 95% band.")
        values = list(runs.values())
        if grouped:
            groups = study.group_runs(runs, chosen.grouping)
            colours = ui.group_colours()
            items = []
            for metric in metrics:
                frame = study.band_frame(groups, metric)
                items.append(uicharts.Series(frame, metric, metric, color_field="method",
                                             zero_rule=metric == "lead_lag_gap",
                                             bounds=uicharts.bounds_for(metric, values, frame), colours=colours))
        else:
            colours = {names[label]: colour for label, colour in ui.run_colours(list(runs)).items()}
            items = []
            for metric in metrics:
                frame = _named(data.compare_frame(runs, metric), names)
                items.append(uicharts.Series(frame, metric, metric, color_field="run", zero_rule=metric == "lead_lag_gap",
                                             bounds=uicharts.bounds_for(metric, values, frame), colours=colours))
            items = _clocked(items, runs, names)
        uicharts.linked_series(items, columns=2, key="compare-charts", export="compare")
        _evaluations(runs, names, {names[label]: colour for label, colour in ui.run_colours(list(runs)).items()})
        if metrics and grouped:
            st.caption("Final results per group: mean [95% interval] over seeds")
            table = study.final_table(groups, metrics)
            st.dataframe(table[[c for c in table.columns if not c.endswith((" mean", " lo", " hi"))]],
                         hide_index=True, width="stretch")
        elif metrics:
            st.caption("Final value and tail average (steps at or after the 60th percentile) per run")
            table = data.compare_table(runs, metrics)
            st.dataframe(table.assign(run=table["run"].map(names)), hide_index=True, width="stretch")

    ui.live_fragment(body, chosen)()


def _unique_names(chosen: ui.Selection, labels: list[str]) -> dict[str, str]:
    """People's names of the runs, with the folder added where two runs would share one."""
    names = {label: chosen.name(label) for label in labels}
    counts = pd.Series(list(names.values())).value_counts()
    return {label: name if counts[name] == 1 else f"{name} ({label})" for label, name in names.items()}


page()
