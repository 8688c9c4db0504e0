"""The page frame every chart page uses: title, then the run and the baseline side by side.

Apart from :mod:`apps.views.ui` so that imports point one way (pages -> ui, pages -> uicharts -> ui);
altair loads only when a page draws a chart (docs/app-notes.md#apps-views-page_frame).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import streamlit as st

from apps.views.ui import live_fragment, no_runs_message, run_caption, selection, try_run, wall_clock
from gdro_lab.runformat.runlog import RunData

if TYPE_CHECKING:  # apps.views.uicharts imports altair: only chart pages need it
    from apps.views import uicharts


def views(render: Callable[[RunData, str], uicharts.Parts | None], title: str, caption: str,
          groups: Callable[[], bool] | None = None) -> None:
    """Page frame: title, then the run and the baseline side by side (or, when ``groups()`` says it
    drew groups of seeds instead, :mod:`apps.views.group_pages`, nothing more).

    ``render(run, key)`` draws the run's column (``key``: ``run`` or ``baseline``, its widgets' key prefix)
    and returns the rest as :class:`apps.views.uicharts.Parts`. The layout and live refresh:
    docs/app-notes.md#apps-views-page_frame.
    """
    chosen = selection()
    st.title(title)
    st.caption(caption)
    if groups is not None and groups():
        return
    if chosen.primary is None:
        if chosen.entries:
            st.info("No run chosen: pick one in the sidebar.", icon=":material/arrow_back:")
        else:
            no_runs_message(chosen)
        return

    def body() -> None:

        shown = chosen.shown
        columns = st.columns(len(shown))  # columns even for one run: see _in_columns
        drawn: list[tuple[Any, str, RunData, uicharts.Parts]] = []
        for column, (role, entry) in zip(columns, shown):
            with column:
                st.subheader(f"{role}: {chosen.name(entry.label)}")
                if chosen.name(entry.label) != entry.label:
                    st.caption(f"folder `{entry.label}`")
                run = try_run(entry)
                if run is None:
                    continue
                if entry.label in chosen.damaged:
                    st.warning(f"This run looks damaged: {chosen.damaged[entry.label]}. Its charts show what "
                               "could be read.", icon=":material/warning:")
                run_caption(run)
                if run.steps.size == 0:
                    st.info("No steps logged yet: this run has just started.", icon=":material/hourglass_empty:")
                    continue
                parts = render(run, role.lower())
                if parts is not None:
                    drawn.append((column, entry.label, run, parts))
        _draw_parts(drawn, title, len(shown))

    live_fragment(body, chosen)()


def _draw_parts(drawn: list[tuple[Any, str, RunData, uicharts.Parts]], title: str, shown: int) -> None:
    """Heatmaps, middle content, linked time series and bottom content of the shown runs."""
    if not drawn:  # e.g. the Config page: no chart, no chart code imported
        return
    from apps.views import uicharts

    key = title.lower().replace(" ", "-")
    if any(parts.heatmaps for *_, parts in drawn):
        uicharts.heatmap_pair([uicharts.HeatmapColumn(run, parts.heatmaps, parts.selected_step)
                               for _, _, run, parts in drawn], key)
    longest = _longest_clock([run for _, _, run, _ in drawn])
    clocks = [_clock(run, label, longest) for _, label, run, _ in drawn]
    _in_columns([parts.middle for *_, parts in drawn], shown, clocks)
    series = [[clock(item) for item in parts.series] for clock, (*_, parts) in zip(clocks, drawn)]
    if any(series):
        uicharts.linked_pair(series, key=f"{key}-charts", labels=[label for _, label, _, _ in drawn])
    _in_columns([parts.bottom for *_, parts in drawn], shown, clocks)


def _in_columns(callables: list[Callable[[], None] | None], shown: int,
                clocks: list[Callable[[uicharts.Series], uicharts.Series]]) -> None:
    """Draw each callable in its run's column (a new row of columns), when any is given, its time
    series on the run's x axis (:func:`apps.views.uicharts.x_axis`). Columns even for one run: a
    baseline picked later must not move the run's widgets into other blocks, or the browser mounts
    them anew and they stop writing their values into the URL (Streamlit 1.67's frontend)."""
    if not any(callables):
        return
    from apps.views import uicharts

    for column, draw, clock in zip(st.columns(shown), callables, clocks):
        if draw is not None:
            with column, uicharts.x_axis(clock):
                draw()


def _longest_clock(runs: list[RunData]) -> float | None:
    """The longest wall clock (seconds) of the shown runs, so that run and baseline share one range."""
    from apps.data.realrun import elapsed_seconds

    ends = [float(np.nanmax(seconds)) for run in runs if (seconds := elapsed_seconds(run)) is not None and seconds.size]
    return max(ends) if ends else None


def _clock(run: RunData, label: str, longest: float | None) -> Callable[[uicharts.Series], uicharts.Series]:
    """The run's x axis for its charts: the wall clock when the sidebar asks for it and the run logs
    step times, on the range [0, ``longest``] shared with the other shown run; else steps."""
    from apps.data.realrun import elapsed_seconds
    from apps.views import uicharts

    seconds = elapsed_seconds(run) if wall_clock() else None
    if seconds is None:
        if wall_clock():
            st.caption(f"**{label}** logs no step times (`time/step`): its charts stay on steps.")
        return lambda item: item
    clock = {label: (run.steps.astype(float), seconds)}
    return lambda item: uicharts.on_wall_clock(item, clock, longest_s=longest)
