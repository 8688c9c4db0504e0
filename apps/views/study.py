"""Study: seeds grouped by method, mean ± 95% interval bands over seeds, and the final results.

Runs whose configs differ only in their seed are one method (``apps.study``). Every chart shows,
per method, the mean over seeds with a shaded 95% Student-t band (mean ± t_{0.975,S-1} sd/√S,
as in the study reports); the table gives each method's final result (tail average ≥60th
percentile of steps, or the last evaluation) as mean [lo, hi] over seeds, worst group included.
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
    st.caption("Seeds grouped by method (the config without its seed): mean over seeds with a shaded 95% "
               "interval (Student t) for every series, and the final results with intervals. Drag or scroll "
               "a chart to zoom every chart; hover for every method's value at a step.")
    if not chosen.entries:
        ui.no_runs_message(chosen)
        return
    by_label = {entry.label: entry for entry in chosen.entries}
    labels = st.multiselect("Runs", list(by_label), default=list(by_label), key="study-runs")

    def body() -> None:
        runs = dict(ui.iter_loaded([by_label[label] for label in labels]))
        if not runs:
            st.info("Pick runs that can be read.", icon=":material/info:")
            return
        methods = study.group_by_method(runs)
        st.caption(" · ".join(f"**{method.label}**: {method.seeds} seed{'s' * (method.seeds != 1)}"
                              for method in methods))
        names = data.scalar_names(runs.values())
        if "lead_lag_gap" not in names:
            names.insert(0, "lead_lag_gap")
        metrics = st.multiselect("Metrics", names, default=[name for name in DEFAULT_METRICS if name in names],
                                 key="study-metrics")
        items = [uicharts.Series(study.band_frame(methods, metric), metric, metric, color_field="method",
                           zero_rule=metric == "lead_lag_gap") for metric in metrics]
        uicharts.linked_series(items, columns=2, key="study-charts")
        if any(method.seeds < 2 for method in methods):
            st.caption("Methods with one seed have no interval (no band).")
        st.subheader("Final results (mean [95% interval] over seeds)")
        table = study.final_table(methods, study.final_metrics(methods))
        shown = [column for column in table.columns if not column.endswith((" mean", " lo", " hi"))]
        st.dataframe(table[shown], hide_index=True, width="stretch", key="study-table")

    ui.live_fragment(body, chosen)()


page()
