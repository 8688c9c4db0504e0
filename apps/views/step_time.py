"""Step time: where a real run's wall clock goes (``time/*`` scalars), next to its throughput.

A stacked area of seconds per step by phase (plan, generate, reward, controllers, logprobs,
update, sync, eval, and ``other`` = time/step − the phases), the total step time and tokens per
second, and a table of mean seconds per step and share of the step per phase.
"""

from __future__ import annotations

import altair as alt
import streamlit as st

from apps import charts, data, interactive, realrun, ui, uicharts
from gdro_lab.runlog import RunData

TITLE = "Step time"


def _stacked(run: RunData) -> alt.Chart:
    """Seconds per step stacked by phase (phases in a fixed order, stable colours)."""
    frame = realrun.time_frame(run)
    phases = list(dict.fromkeys(frame["phase"]))
    palette = interactive.colour_map(phases)
    zoom = alt.selection_interval(bind="scales", encodings=["x"])
    return alt.Chart(frame).mark_area().encode(
        x=alt.X("step:Q", title="step", scale=alt.Scale(zero=False, nice=False)),
        y=alt.Y("seconds:Q", title="seconds per step", stack="zero"),
        color=alt.Color("phase:N", sort=phases, scale=alt.Scale(domain=phases, range=[palette[p] for p in phases]),
                        legend=alt.Legend(orient="bottom", columns=5)),
        order=alt.Order("phase_order:Q"),
        tooltip=[alt.Tooltip("step:Q"), alt.Tooltip("phase:N"), alt.Tooltip("seconds:Q", format=".3f")],
    ).transform_calculate(
        phase_order=f"indexof({phases!r}, datum.phase)"
    ).add_params(zoom).properties(title="Seconds per step by phase (stacked)", height=charts.CHART_HEIGHT)


def render(run: RunData, key: str) -> None:
    """Stacked phases, total and throughput (linked), and the per-phase table."""
    if not realrun.has_step_times(run):
        ui.missing("step times (`time/*` scalars: a real run's trainer logs them; simulator runs do not)")
        return
    uicharts.chart(_stacked(run))
    items = [uicharts.Series(data.scalars_long(run, {realrun.TIME_TOTAL: "time/step"}), "Total step time", "seconds")]
    if data.has_scalar(run, realrun.TOKENS_PER_S):
        items.append(uicharts.Series(data.scalars_long(run, {realrun.TOKENS_PER_S: "tokens / s"}), "Throughput",
                               "tokens per second"))
    uicharts.linked_series(items, key=f"{key}-charts")
    st.caption("Per phase over the whole run")
    st.dataframe(realrun.time_table(run), hide_index=True, width="stretch")


ui.views(render, TITLE, "A real run's cost per step by phase (`time/*`), so it can be read next to its "
         "curriculum.")
