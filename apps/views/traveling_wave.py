"""Traveling wave (paper Fig. 1, 3, 5): prompt share, Prompt-GDRO weight and realized reward by bin.

Three steps x bins heatmaps (stacked in one chart element), a step slider (marked on the
heatmaps) and, for the field chosen below them, bars at the chosen step next to the Fig. 5
snapshots (start, early-mid, late-mid, end) and the Fig. 1 tail average (steps at or after the
60th percentile).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from apps import charts, data, ui, uicharts
from gdro_lab.runlog import RunData

TITLE = "Traveling wave"
PANELS = (("share", "Prompt share q̂(b)"), ("weight", "Prompt-GDRO weight q(b)"), (None, "Realized reward"))


def _panels(run: RunData) -> list[tuple[str | None, str]]:
    """(field, title) per panel; the reward panel falls back to the success rate."""
    return [(field if field is not None else data.reward_field(run), title) for field, title in PANELS]


def _snapshot_bars(run: RunData, field: str, index: int) -> pd.DataFrame:
    """Snapshot rows of a field plus the chosen step (unless it is a snapshot), as one grouped-bar frame."""
    snapshots = data.snapshot_frame(run, field)
    if snapshots["snapshot"].str.endswith(f"(step {int(run.steps[index])})").any():
        return snapshots
    chosen = data.bins_at_step(run, [field], index).drop(columns="field")
    chosen = chosen.assign(snapshot=f"selected (step {int(run.steps[index])})", order=-1)
    return pd.concat([chosen, snapshots], ignore_index=True)


def render(run: RunData, key: str) -> None:
    """Heatmaps, then the snapshot bars of one field (chosen with a radio)."""
    index = ui.step_slider(run, key=f"{key}-step")
    selected_step = float(run.steps[index])
    shown = []
    for field, title in _panels(run):
        if field is None:
            ui.missing("a per-bin reward or success rate")
        elif not data.has_bins(run, field):
            ui.missing(f"the per-bin field `{field}`")
        else:
            shown.append((field, f"{title} [{field}]"))
    if shown:
        uicharts.heatmaps(run, shown, selected_step=selected_step)
    panels = [(field, title) for field, title in _panels(run) if field is not None and data.has_bins(run, field)]
    if not panels:
        return
    # One field at a time (a choice, not tabs: tabs would send and lay out every field's chart).
    titles = {title: field for field, title in panels}
    chosen = st.radio("Snapshots of", list(titles), horizontal=True, key=f"{key}-snapshots")
    field = titles.get(str(chosen), panels[0][0])
    bars = _snapshot_bars(run, field, index)
    order = list(bars.sort_values("order")["snapshot"].drop_duplicates())
    uicharts.chart(charts.grouped_bars(bars, "snapshot", f"{chosen}: snapshots and tail average", field, group_order=order))


ui.views(render, TITLE, "Fig. 3/5 of the paper: how the prompt mass, the adversary's weights and the "
         "reward move across difficulty bins over training. Bin 0 is the hardest bin.")
