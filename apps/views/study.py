"""Study: seeds grouped (by the config keys that differ, or those picked in the sidebar), mean ±
95% interval bands over seeds, and the final results.

Runs whose configs differ only in their seed are one group (``apps.study``), named by the keys
that tell the groups apart ("grpo lr×1.58"). Every chart shows, per group, the mean over seeds
with a shaded 95% Student-t band (mean ± t_{0.975,S-1} sd/√S, as in the study reports, clipped
to the metric's range); the table gives each group's final result (tail average ≥60th
percentile of steps, or the last evaluation) as mean [lo, hi] over seeds, worst group included.
Colours: a hue per method, a lightness per variant.
"""

from __future__ import annotations

import streamlit as st

from apps import data, study, ui, uicharts

TITLE = "Study"
DEFAULT_METRICS = ("mean_success", "worst_bin_success", "lead_lag_gap", "se_reduction_pct")


def page() -> None:
    """Pick runs (default: every run listed); draw bands per metric and the final-results table."""
    chosen = ui.selection()
    st.title(TITLE)
    st.caption("Seeds grouped by the config keys that differ between runs (or those chosen under *Group runs by*): "
               "mean over seeds with a shaded 95% interval (Student t) for every series, and the final results "
               "with intervals. Drag or scroll a chart to zoom every chart; hover for every group's value at a step.")
    if not chosen.entries:
        ui.no_runs_message(chosen)
        return
    by_label = {entry.label: entry for entry in chosen.entries}
    unknown = ui.url_seed("study-runs", list(by_label), multiple=True)
    if unknown:
        st.warning("The URL names runs that are not listed: " + ", ".join(f"**{label}**" for label in unknown),
                   icon=":material/link_off:")
    default = None if "study-runs" in st.session_state else list(by_label)
    labels = st.multiselect("Runs", list(by_label), default=default, key="study-runs", format_func=chosen.name)
    ui.url_sync("study-runs", labels, list(by_label))

    def body() -> None:
        runs = dict(ui.iter_loaded([by_label[label] for label in labels]))
        if not runs:
            st.info("Pick runs that can be read.", icon=":material/info:")
            return
        groups = study.group_runs(runs, chosen.grouping)
        st.caption(" · ".join(f"**{group.label}**: {group.seeds} seed{'s' * (group.seeds != 1)}" for group in groups))
        names = data.scalar_names(runs.values())
        if "lead_lag_gap" not in names:
            names.insert(0, "lead_lag_gap")
        metrics = st.multiselect("Metrics", names, default=[name for name in DEFAULT_METRICS if name in names],
                                 key="study-metrics", bind="query-params")
        colours = ui.group_colours()
        items = []
        for metric in metrics:
            frame = study.band_frame(groups, metric)
            items.append(uicharts.Series(frame, metric, metric, color_field="method", zero_rule=metric == "lead_lag_gap",
                                         bounds=uicharts.bounds_for(metric, list(runs.values()), frame),
                                         colours=colours))
        uicharts.linked_series(items, columns=2, key="study-charts", export="study")
        if ui.wall_clock():
            st.caption("Bands over seeds are drawn against steps (the seeds' clocks differ); the per-run pages "
                       "and Compare draw the wall clock.")
        if any(group.seeds < 2 for group in groups):
            st.caption("Groups with one seed have no interval (no band).")
        st.subheader("Final results (mean [95% interval] over seeds)")
        table = study.final_table(groups, study.final_metrics(groups))
        shown = [column for column in table.columns if not column.endswith((" mean", " lo", " hi"))]
        st.dataframe(table[shown], hide_index=True, width="stretch", key="study-table")

    ui.live_fragment(body, chosen)()


page()
