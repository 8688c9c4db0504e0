"""Evaluations of real runs: per-benchmark mean@k and pass@k with their 95% bootstrap intervals.

Reads the agreed metric names of ``gdro eval`` and the trainer (``apps.realrun``): one line per
benchmark plus ``pooled``, ``worst group`` and ``worst benchmark``, each with its shaded
``_lo``–``_hi`` band; per-group metrics on request; and the latest evaluation as a table of
``value [lo, hi]``.
"""

from __future__ import annotations

import streamlit as st

from apps import realrun, ui, uicharts
from gdro_lab.runlog import RunData

TITLE = "Evaluations"


def render(run: RunData, key: str) -> None:
    """One linked chart per metric (mean@k, pass@k), then groups on request and the latest table."""
    frame = realrun.eval_metrics(run)
    if frame.empty:
        ui.missing("evaluation metrics with the agreed names (`{bench}/mean@{k}`, `pooled/...`, "
                   "`worst_group/...` in eval.jsonl; see the Outcomes page for other names)")
        return
    metrics = sorted(frame["metric"].unique(), key=lambda name: (name.split("@")[0] != "mean", name))
    items = [uicharts.Series(realrun.eval_series(frame, metric), f"{metric} per benchmark (95% interval)", metric,
                       smooth=False) for metric in metrics]
    uicharts.linked_series(items, key=f"{key}-charts")
    groups = sorted(frame.loc[frame["kind"] == "group", "name"].unique())
    if groups:
        chosen = st.multiselect("Groups", groups, default=[], key=f"{key}-groups",
                                help="Per-group metrics (group/{group}/...), e.g. to find the worst group.")
        if chosen:
            part = frame[(frame["kind"] == "group") & frame["name"].isin(chosen)]
            uicharts.linked_series([uicharts.Series(realrun.eval_series(part, metric, ("group",)), f"{metric} per group",
                                        metric, smooth=False) for metric in metrics], key=f"{key}-groups-charts")
    st.caption(f"Latest evaluation (step {int(frame['step'].max())}): value [95% interval]")
    st.dataframe(realrun.latest_eval_table(frame), hide_index=True, width="stretch")


ui.views(render, TITLE, "Per-benchmark evaluation of a real run (`gdro eval`, the trainer): mean@k and "
         "pass@k with 95% bootstrap intervals, pooled, worst group and worst benchmark.")
