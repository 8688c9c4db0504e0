"""Compare: two or more runs overlaid (e.g. GRPO vs Prompt-GDRO vs Rollout-GDRO from one study).

Any logged scalar (the lead-lag gap recomputed by Eq. 32) and any evaluation metric, one line
per run, plus a table of final values and tail averages (steps at or after the 60th percentile).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from apps import charts, data, ui
from gdro_lab.runlog import RunData

TITLE = "Compare"
MAX_DEFAULT_RUNS = 4


def _default_labels(chosen: ui.Selection) -> list[str]:
    """The run and its baseline first, then other listed runs, up to MAX_DEFAULT_RUNS."""
    labels = [entry.label for _, entry in chosen.shown]
    labels += [entry.label for entry in chosen.entries if entry.label not in labels]
    return labels[:MAX_DEFAULT_RUNS]


def _evaluation_overlay(runs: dict[str, RunData]) -> None:
    """One evaluation metric over steps, one line per run."""
    frames = [data.evals_frame(run).assign(run=label) for label, run in runs.items()]
    evals = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if evals.empty:
        st.info("None of these runs has evaluation results.", icon=":material/info:")
        return
    metrics = sorted(evals["metric"].unique())
    metric = st.selectbox("Evaluation metric", metrics, key="compare-eval-metric")
    ui.chart(charts.points(evals[evals["metric"] == metric], f"Evaluation: {metric}", metric, color_field="run"))


def page() -> None:
    """Pick runs and metrics; draw one overlay chart per metric."""
    chosen = ui.selection()
    st.title(TITLE)
    st.caption("Runs overlaid on the same axes: pick two or more, e.g. GRPO, Prompt-GDRO and Rollout-GDRO "
               "of one study.")
    if not chosen.entries:
        ui.no_runs_message(chosen)
        return
    by_label = {entry.label: entry for entry in chosen.entries}
    labels = st.multiselect("Runs", list(by_label), default=_default_labels(chosen), key="compare-runs")

    def body() -> None:
        runs = dict(ui.iter_loaded([by_label[label] for label in labels]))
        if len(runs) < 2:
            st.info("Pick at least two runs that can be read to compare them.", icon=":material/info:")
            if not runs:
                return
        names = data.scalar_names(runs.values())
        if "lead_lag_gap" not in names and any(not data.lead_lag_frame(r).empty for r in runs.values()):
            names.insert(0, "lead_lag_gap")
        defaults = [name for name in data.COMPARE_DEFAULTS if name in names]
        picked, smoothing = st.columns([4, 1])
        metrics = picked.multiselect("Metrics", names, default=defaults or names[:3], key="compare-metrics")
        window = smoothing.number_input("Smoothing (steps)", min_value=1, max_value=200, value=1,
                                        key="compare-smoothing", help="Trailing rolling mean; 1 = raw values.")
        columns = st.columns(2)
        for position, metric in enumerate(metrics):
            with columns[position % 2]:
                frame = data.smooth(data.compare_frame(runs, metric), int(window))
                ui.chart(charts.lines(frame, metric, metric, color_field="run", zero_rule=metric == "lead_lag_gap"))
        _evaluation_overlay(runs)
        if metrics:
            st.caption("Final value and tail average (steps at or after the 60th percentile) per run")
            st.dataframe(data.compare_table(runs, metrics), hide_index=True, width="stretch")

    ui.live_fragment(body, chosen)()


page()
