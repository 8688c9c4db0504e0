"""Study: seeds grouped (by the config keys that differ within each study, or those picked in the
sidebar), a line per group with a band over seeds, and the final results.

Groups from ``apps.data.study``; bands (95% t, ± 1 SE, min–max or IQR) only for groups of at least 3
seeds; the table gives each group's final result as mean [lo, hi]. What is drawn, and why:
docs/app-notes.md#apps-views-study.
"""

from __future__ import annotations


import streamlit as st

from apps.data import results, study
from apps.views import ui, uicharts

TITLE = "Study"
DEFAULT_METRICS = ("mean_success", "worst_bin_success", "lead_lag_gap", "se_reduction_pct")


def page() -> None:
    """Pick runs (default: the picks, else the first study); draw bands per metric and the final table."""
    chosen = ui.selection()
    st.title(TITLE)
    st.caption("Seeds grouped by the config keys that differ within each study (or those chosen under *Group runs "
               "by*): a line per group over its seeds, with a band, and the final results with intervals. Click a "
               "legend entry to isolate it; drag or scroll a chart to zoom.")
    if not chosen.entries:
        ui.no_runs_message(chosen)
        return
    by_label = {entry.label: entry for entry in chosen.entries}
    labels = ui.runs_picker(chosen, by_label, "study-runs", chosen.picked_or_first_study(),
                            "Default: the runs picked on the Runs page, else the first study's runs.")

    def body() -> None:
        runs = dict(ui.iter_loaded([by_label[label] for label in labels]))
        if not runs:
            st.info("Pick runs that can be read.", icon=":material/info:")
            return
        groups = study.group_runs(runs, chosen.grouping)
        listing = " · ".join(f"**{group.label}**: {group.seeds} seed{'s' * (group.seeds != 1)}" for group in groups)
        if len(groups) > ui.MANY_RUNS:
            seeds = sorted({group.seeds for group in groups})
            with st.expander(f"{len(groups)} groups of {', '.join(map(str, seeds))} seeds", icon=":material/groups:"):
                st.caption(listing)
        else:
            st.caption(listing)
        names = results.scalar_names(runs.values())
        if "lead_lag_gap" not in names:
            names.insert(0, "lead_lag_gap")
        metric_box, centre_box, interval_box = st.columns([3, 1, 1])
        metrics = metric_box.multiselect("Metrics", names, default=[name for name in DEFAULT_METRICS if name in names],
                                         key="study-metrics", bind="query-params")
        centre = str(centre_box.selectbox("Group line", study.CENTRES, key="study-centre", bind="query-params"))
        options = study.INTERVALS[centre]
        if st.session_state.get("study-interval") not in options:
            st.session_state["study-interval"] = options[0]
        interval = str(interval_box.selectbox("Band", options, key="study-interval", bind="query-params",
                                              help=f"Drawn for groups of at least {study.MIN_BAND_SEEDS} seeds."))
        colours = ui.group_colours()
        labels_shown = [group.label for group in groups]
        methods = {group.label: chosen.grouping.method_of.get(group.runs[0][0], "") for group in groups}
        ranked = metrics and len(groups) > uicharts.top_groups()  # the top k by the first metric
        rank = uicharts.rank_by_final({group.label: [run for _, run in group.runs] for group in groups},
                                      metrics[0]) if ranked else []
        legend = uicharts.legend_for(labels_shown, {label: label for label in labels_shown}, methods, rank=rank,
                                     ranked_by=f"final {metrics[0]}" if ranked else "")
        producer_of = {group.label: chosen.producer(group.runs[0][0]) for group in groups}
        items = []
        for metric in metrics:
            frame = study.band_frame(groups, metric, centre, interval)
            item = uicharts.Series(frame, metric, metric, color_field="method", zero_rule=metric == "lead_lag_gap",
                                   bounds=uicharts.bounds_for(metric, list(runs.values()), frame), colours=colours,
                                   legend=legend)
            items += uicharts.split_by_producer(item, producer_of, "method")
        st.caption(study.band_note(groups, centre, interval))
        uicharts.linked_series(items, columns=2, key="study-charts", export="study")
        if ui.wall_clock():
            st.caption("Bands over seeds are drawn against steps (the seeds' clocks differ); the per-run pages "
                       "and Compare draw the wall clock.")
        st.subheader("Final results (mean [95% interval] over seeds)")
        table = study.final_table(groups, study.final_metrics(groups))
        shown = [column for column in table.columns if not column.endswith((" mean", " lo", " hi"))]
        st.dataframe(table[shown], hide_index=True, width="stretch", key="study-table")

    ui.live_fragment(body, chosen)()


page()
