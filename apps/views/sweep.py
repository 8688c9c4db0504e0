"""Sweep: the final (or tail-mean) metric against each swept config key, one line per method (a
step-matched baseline its own line) with 95% intervals over the runs that share a setting (a
learning-rate scale first, on a log axis), and the parallel coordinates of the sweep.

The runs are those picked on the Runs page, else the study of the first listed run
(:func:`apps.data.sweep.sweep_keys` finds the keys that differ between them).
"""

from __future__ import annotations

import streamlit as st

from apps.data import study, sweep
from apps.data.colours import method_hues
from apps.views import charts, ui, uicharts

TITLE = "Sweep"


def page() -> None:
    """Metric, final value and keys; a chart per swept key; parallel coordinates."""
    chosen = ui.selection()
    st.title(TITLE)
    st.caption("A sweep's final metric against each swept key: one line per method, 95% interval over the runs "
               "that share a setting (3 runs or more). The runs picked on the Runs page, else the first study.")
    if not chosen.entries:
        ui.no_runs_message(chosen)
        return
    by_label = {entry.label: entry for entry in chosen.entries}
    labels = [label for label in chosen.picked_or_first_study() if label in by_label]

    def body() -> None:
        runs = dict(ui.iter_loaded([by_label[label] for label in labels]))
        if len(runs) < 2:
            st.info("Pick at least two runs of a sweep on the Runs page.", icon=":material/info:")
            return
        keys = sweep.sweep_keys({label: run.config for label, run in runs.items()})
        if not keys:
            st.info("These runs differ only in their method and seed: nothing is swept.", icon=":material/info:")
            return
        methods = [study.Method(label, label, ((label, run),)) for label, run in runs.items()]
        metrics = study.final_metrics(methods)
        metric_box, final_box = st.columns([3, 1])
        metric = str(metric_box.selectbox("Metric", metrics, key="sweep-metric", bind="query-params"))
        final = str(final_box.selectbox("Final value", sweep.FINALS, key="sweep-final", bind="query-params",
                                        help="Tail mean: steps at or after the 60th percentile; or the last value."))
        st.caption(f"{len(runs)} runs; swept: {', '.join(keys)}")
        colours = method_hues(sweep.line_of(run.config, run.path.name) for run in runs.values())
        for key in keys:
            frame = sweep.sweep_frame(runs, key, metric, final)
            name = f"{metric} ({final}) against {key}"
            uicharts.chart(charts.sweep_lines(frame, key, metric, colours, log_x=key in sweep.LR_KEYS, final=final),
                           csv={name: frame}, key=f"sweep-{key}")
        names = {label: chosen.name(label) for label in runs}
        parallel = sweep.parallel_frame(runs, keys, metric, final, names)
        uicharts.chart(charts.parallel_coordinates(parallel, [*keys, metric], colours),
                       csv={"parallel coordinates": parallel}, key="sweep-parallel")

    ui.live_fragment(body, chosen)()


page()
