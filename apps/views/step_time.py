"""Step time: where a real run's wall clock goes (``time/*`` scalars), next to its throughput.

Seconds per step by phase stacked (``other`` = time/step − the phases), the total step time and
tokens per second, linked with the baseline's, and a table per phase. Shares logged under ``time/``
are never stacked (docs/app-notes.md#apps-views-step_time).
"""

from __future__ import annotations

import math

import streamlit as st

from apps.data import curriculum, realrun
from apps.views import page_frame, ui, uicharts
from gdro_lab.runformat.runlog import RunData

TITLE = "Step time"


def render(run: RunData, key: str) -> uicharts.Parts | None:
    """Fractions (in the column); stacked phases, total and throughput (linked); the per-phase table."""
    del key
    if not realrun.has_step_times(run):
        ui.missing("step times (`time/*` scalars: a real run's trainer logs them; simulator runs do not)")
        return None
    fractions = realrun.time_fractions(run)
    if fractions:
        st.caption("Mean share of the step: " + ", ".join(f"`{name}` {100 * value:.2f}%"
                                                          for name, value in fractions.items()))
    phases = realrun.time_frame(run).rename(columns={"phase": "series", "seconds": "value"})
    items = [uicharts.Series(phases, "Seconds per step by phase (stacked)", "seconds per step", stacked=True,
                             smooth=False, bounds=(0.0, math.inf)),
             uicharts.Series(curriculum.scalars_long(run, {realrun.TIME_TOTAL: "time/step"}), "Total step time",
                             "seconds", bounds=(0.0, math.inf))]
    if curriculum.has_scalar(run, realrun.TOKENS_PER_S):
        items.append(uicharts.Series(curriculum.scalars_long(run, {realrun.TOKENS_PER_S: "tokens / s"}), "Throughput",
                                     "tokens per second", bounds=(0.0, math.inf)))

    def table() -> None:
        st.caption("Per phase over the whole run")
        st.dataframe(realrun.time_table(run), hide_index=True, width="stretch")

    return uicharts.Parts(series=items, bottom=table)


page_frame.views(render, TITLE, "A real run's cost per step by phase (`time/*`), so it can be read next to its "
         "curriculum.")
