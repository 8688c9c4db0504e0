"""Traveling wave (paper Fig. 1, 3, 5): prompt share, Prompt-GDRO weight and realized reward by bin.

Three steps x bins heatmaps (stacked in one chart element), a step slider (marked on the
heatmaps) and, for the field chosen below them, bars at the chosen step next to the Fig. 5
snapshots (start, early-mid, late-mid, end) and the Fig. 1 tail average (steps at or after the
60th percentile). *Show* offers groups of seeds instead (:mod:`apps.views.group_pages`): each the
mean or median of its seeds' logged values, two side by side on one colour scale per field.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import streamlit as st

from apps.data import curriculum
from apps.views import charts, group_pages, page_frame, ui, uicharts
from gdro_lab.runformat.runlog import RunData

TITLE = "Traveling wave"
PANELS = (("share", "Prompt share q̂(b)"), ("weight", "Prompt-GDRO weight q(b)"), (None, "Realized reward"))


def _panels(run: RunData) -> list[tuple[str | None, str]]:
    """(field, title) per panel; the reward panel falls back to the success rate."""
    return [(field if field is not None else curriculum.reward_field(run), title) for field, title in PANELS]


def _snapshot_bars(run: RunData, field: str, index: int) -> pd.DataFrame:
    """Snapshot rows of a field plus the chosen step (unless it is a snapshot), as one grouped-bar frame."""
    snapshots = curriculum.snapshot_frame(run, field)
    if snapshots["snapshot"].str.endswith(f"(step {int(run.steps[index])})").any():
        return snapshots
    chosen = curriculum.bins_at_step(run, [field], index).drop(columns="field")
    chosen = chosen.assign(snapshot=f"selected (step {int(run.steps[index])})", order=-1)
    return pd.concat([chosen, snapshots], ignore_index=True)


def _bar_domain(field: str, beside: Sequence[RunData] | None) -> tuple[float, float] | None:
    """The bars' value axis, shared by the runs (or groups) side by side: from 0 (or the lowest
    value) to the highest value any of them logs (the run and its baseline: :func:`uicharts.bar_domain`)."""
    if beside is None:
        return uicharts.bar_domain(field)
    values = np.concatenate([np.ravel(run.bins[field]) for run in beside if curriculum.has_bins(run, field)]
                            or [np.empty(0)])
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return None
    low, high = min(0.0, float(finite.min())), max(0.0, float(finite.max()))
    return (low, high) if high > low else None


def render(run: RunData, key: str, beside: Sequence[RunData] | None = None) -> uicharts.Parts:
    """Step slider; heatmaps (drawn with the other column's); then the snapshot bars of one field
    (``beside``: the runs drawn side by side, when not the sidebar's run and baseline)."""
    index = ui.step_slider(run, key=f"{key}-step")
    selected_step = float(run.steps[index])
    shown = []
    for field, title in _panels(run):
        if field is None:
            ui.missing_or_warmup(run, ("success",), "a per-bin reward or success rate", "reward per bin")
        elif not curriculum.has_bins(run, field):
            ui.missing_or_warmup(run, (field,), f"the per-bin field `{field}`", f"`{field}` per bin")
        else:
            shown.append((field, f"{title} [{field}]"))
    panels = [(field, title) for field, title in _panels(run) if field is not None and curriculum.has_bins(run, field)]

    def bars() -> None:
        # One field at a time (a choice, not tabs: tabs would send and lay out every field's chart).
        titles = {title: field for field, title in panels}
        chosen = st.radio("Snapshots of", list(titles), horizontal=True, key=f"{key}-snapshots", bind="query-params")
        field = titles.get(str(chosen), panels[0][0])
        frame = _snapshot_bars(run, field, index)
        order = list(frame.sort_values("order")["snapshot"].drop_duplicates())
        name = f"{chosen}: snapshots and tail average"
        uicharts.chart(charts.grouped_bars(frame, "snapshot", name, field, group_order=order,
                                           y_domain=_bar_domain(field, beside)),
                       csv={name: frame.drop(columns="order")}, key=f"{key}-snapshots-csv")

    return uicharts.Parts(heatmaps=shown, selected_step=selected_step, bottom=bars if panels else None)


page_frame.views(render, TITLE, "Fig. 3/5 of the paper: how the prompt mass, the adversary's weights and the "
         "reward move across difficulty bins over training. Bin 0 is the hardest bin.",
         groups=lambda: group_pages.page("traveling-wave", render))
