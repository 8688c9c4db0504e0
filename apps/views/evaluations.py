"""Evaluations of real runs: per-benchmark mean@k and pass@k with their 95% bootstrap intervals.

Reads the agreed metric names of ``gdro eval`` and the trainer (``apps.data.realrun``): one line per
benchmark plus ``pooled``, ``worst group`` and ``worst benchmark``, each with its shaded
``_lo``–``_hi`` band; per-group metrics on request; and the latest evaluation as a table of
``value [lo, hi]``.
"""

from __future__ import annotations

import streamlit as st

from apps.data import realrun
from apps.views import page_frame, ui, uicharts
from gdro_lab.runformat.runlog import RunData

TITLE = "Evaluations"


def render(run: RunData, key: str) -> uicharts.Parts | None:
    """One chart per metric (mean@k, pass@k; linked with the baseline's), then groups on request
    and the latest table."""
    frame = realrun.eval_metrics(run)
    if frame.empty:
        ui.missing("evaluation metrics with the agreed names (`{bench}/mean@{k}`, `pooled/...`, "
                   "`worst_group/...` in eval.jsonl; see the Outcomes page for other names)")
        return None
    metrics = sorted(frame["metric"].unique(), key=lambda name: (name.split("@")[0] != "mean", name))
    items = []
    for metric in metrics:
        series = realrun.eval_series(frame, metric)
        items.append(uicharts.Series(series, f"{metric} per benchmark (95% interval)", metric, smooth=False,
                                     bounds=(0.0, 1.0), colours=realrun.eval_colours(list(series["series"]))))

    def bottom() -> None:
        groups = sorted(frame.loc[frame["kind"] == "group", "name"].unique())
        if groups:
            chosen = st.multiselect("Groups", groups, default=[], key=f"{key}-groups", bind="query-params",
                                    help="Per-group metrics (group/{group}/...), e.g. to find the worst group.")
            if chosen:
                part = frame[(frame["kind"] == "group") & frame["name"].isin(chosen)]
                uicharts.linked_series([uicharts.Series(realrun.eval_series(part, metric, ("group",)),
                                                        f"{metric} per group", metric, smooth=False, bounds=(0.0, 1.0))
                                        for metric in metrics], key=f"{key}-groups-charts",
                                       export=f"evaluations-{key}-groups", in_column=True)
        st.caption(f"Latest evaluation (step {int(frame['step'].max())}): value [95% interval]")
        st.dataframe(realrun.latest_eval_table(frame), hide_index=True, width="stretch")

    return uicharts.Parts(series=items, bottom=bottom)


page_frame.views(render, TITLE, "Per-benchmark evaluation of a real run (`gdro eval`, the trainer): mean@k and "
         "pass@k with 95% bootstrap intervals, pooled, worst group and worst benchmark.")
