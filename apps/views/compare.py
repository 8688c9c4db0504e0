"""Compare: two or more runs overlaid (e.g. GRPO vs Prompt-GDRO vs Rollout-GDRO from one study).

Any logged scalar (the lead-lag gap recomputed by Eq. 32) and any evaluation metric, one line
per run — or, with "Group seeds by method", one mean line per method with its 95% band over
seeds (as on the Study page) — plus a table of final values and tail averages (steps at or
after the 60th percentile). Charts are linked: zoom and crosshair act on all of them.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from apps import charts, data, study, ui, uicharts
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
    uicharts.chart(charts.points(evals[evals["metric"] == metric], f"Evaluation: {metric}", metric, color_field="run",
                           colours=ui.colours(runs)))


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
        picked, grouping = st.columns([4, 1])
        metrics = picked.multiselect("Metrics", names, default=defaults or names[:3], key="compare-metrics")
        grouped = grouping.toggle("Group seeds by method", value=False, key="compare-group",
                                  help="One mean line per method (config without the seed) with its 95% band.")
        if grouped:
            methods = study.group_by_method(runs)
            items = [uicharts.Series(study.band_frame(methods, metric), metric, metric, color_field="method",
                               zero_rule=metric == "lead_lag_gap") for metric in metrics]
        else:
            items = [uicharts.Series(data.compare_frame(runs, metric), metric, metric, color_field="run",
                               zero_rule=metric == "lead_lag_gap") for metric in metrics]
        uicharts.linked_series(items, columns=2, key="compare-charts")
        _evaluation_overlay(runs)
        if metrics and grouped:
            st.caption("Final results per method: mean [95% interval] over seeds")
            table = study.final_table(methods, metrics)
            st.dataframe(table[[c for c in table.columns if not c.endswith((" mean", " lo", " hi"))]],
                         hide_index=True, width="stretch")
        elif metrics:
            st.caption("Final value and tail average (steps at or after the 60th percentile) per run")
            st.dataframe(data.compare_table(runs, metrics), hide_index=True, width="stretch")

    ui.live_fragment(body, chosen)()


page()
