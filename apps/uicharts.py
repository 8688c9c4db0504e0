"""Chart elements of the pages: heatmaps (stacked per run), linked time series and plain charts.

Every spec is built once per run signature and set of options (``st.cache_data``) and sent lean
(:func:`apps.interactive.to_spec`: Arrow datasets, no per-mark ARIA text). Long series are
thinned for the browser (:func:`apps.interactive.thin_steps`) after smoothing; long heatmaps
average blocks of steps. The sidebar's choices (EMA weight, log scale, shared colour scale) and
the runs shown come from :mod:`apps.ui`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from apps import charts, data, interactive
from apps.ui import LOG_KEY, colours, ema_weight, get_run, selection, shared_scale, shown_runs
from gdro_lab.runlog import RunData

#: Heatmap cells per chart: one run alone, and each of two runs side by side. A browser draws
#: every cell (about 0.1 ms each on a small machine), so long runs are averaged over step blocks.
HEATMAP_CELLS = {1: 2000, 2: 1000}


#: Width of each chart of a linked view (pixels; Vega-Lite cannot stretch concatenated charts to
#: their container): by charts per row, and for one per row by the runs shown side by side.
CONCAT_WIDTH = {2: 450, 3: 300}


SINGLE_WIDTH = {1: 1040, 2: 470}


#: Room left for a legend on the right of a stacked chart (colour gradient, or symbols and names).
LEGEND_WIDTH = {"gradient": 60, "symbols": 140}


def chart(figure: charts.AnyChart) -> None:
    """Show an altair chart across the column's width (sent lean: :func:`apps.interactive.to_spec`)."""
    st.vega_lite_chart(interactive.to_spec(figure), width="stretch")


def stacked_charts(figures: Sequence[charts.AnyChart]) -> None:
    """Several altair charts stacked in one chart element (one Vega view in the browser)."""
    if len(figures) == 1:
        chart(figures[0])
        return
    width = SINGLE_WIDTH[min(2, max(1, len(selection().shown)))] - LEGEND_WIDTH["symbols"]
    st.vega_lite_chart(interactive.stack([interactive.to_spec(figure) for figure in figures], width),
                       width="content")


def heatmap_columns(run: RunData) -> int:
    """Most heatmap columns for this run, given the cell budget of the current layout."""
    cells = HEATMAP_CELLS[min(2, max(1, len(selection().shown)))]
    return max(50, cells // max(1, run.num_bins))


def heatmap(run: RunData, field: str, title: str, selected_step: float | None = None) -> None:
    """A steps x bins heatmap of a per-bin field, averaged over step blocks when the run is long;
    with a baseline shown and the shared scale on, both use one colour scale."""
    st.vega_lite_chart(_one_heatmap(run, field, title, selected_step), width="stretch")


def heatmaps(run: RunData, panels: Sequence[tuple[str, str]], selected_step: float | None = None) -> None:
    """Several heatmaps of a run (``(field, title)`` each) stacked in one chart element: the browser
    sets up one Vega view instead of one per heatmap (each is still cached on its own)."""
    width = SINGLE_WIDTH[min(2, max(1, len(selection().shown)))] - LEGEND_WIDTH["gradient"]
    specs = [_one_heatmap(run, field, title, selected_step) for field, title in panels]
    st.vega_lite_chart(interactive.stack(specs, width), width="content")


def _one_heatmap(run: RunData, field: str, title: str, selected_step: float | None) -> dict[str, object]:
    columns = heatmap_columns(run)
    block = data.heatmap_block(run.steps.size, columns)
    if block > 1:
        title = f"{title} · means of {block}-step blocks"
    domain = shared_domain(field) if shared_scale() and field not in charts.DOMAINS else None
    return _heatmap_spec(str(run.path), data.run_signature(run.path), field, columns, title, selected_step,
                         tuple(domain) if domain is not None else None)


@st.cache_data(max_entries=128, show_spinner=False)
def _heatmap_spec(path_text: str, signature: tuple[tuple[str, int, int], ...], field: str, columns: int, title: str,
                  selected_step: float | None, domain: tuple[float, ...] | None) -> dict[str, object]:
    """A heatmap's Vega-Lite spec, cached on the run's files and the view's options."""
    run = get_run(Path(path_text))
    figure = charts.heatmap(data.heatmap_frame(run, field, columns), field, title, selected_step, domain=domain,
                            num_bins=run.num_bins)
    return interactive.to_spec(figure)


def shared_domain(field: str) -> list[float] | None:
    """[min, max] of a per-bin field over the shown runs (None when fewer than two show it)."""
    runs = [run for run in shown_runs() if data.has_bins(run, field)]
    if len(runs) < 2:
        return None
    low = min(float(np.nanmin(run.bins[field])) for run in runs)
    high = max(float(np.nanmax(run.bins[field])) for run in runs)
    return [low, high] if high > low else None


@dataclass(frozen=True)
class Series:
    """One time-series chart of a page: a long frame (step, <color_field>, value[, lo, hi]) and labels."""

    frame: pd.DataFrame
    title: str
    y_title: str
    color_field: str = "series"
    dashed: tuple[str, ...] = ()
    zero_rule: bool = False
    y_domain: tuple[float, float] | None = None
    smooth: bool = True


def linked_series(items: Sequence[Series], columns: int = 1, key: str | None = None) -> None:
    """The page's time-series charts as one linked view: shared x-zoom (drag / wheel, double-click
    resets), a crosshair over every series, the sidebar's EMA smoothing (raw faint) and log scale."""
    items = [item for item in items if not item.frame.empty]
    if not items:
        return
    names = [str(name) for item in items for name in pd.unique(item.frame[item.color_field])]
    palette = tuple(sorted(colours(names).items()))
    options = tuple((item.title, item.y_title, item.color_field, item.dashed, item.zero_rule, item.y_domain,
                     item.smooth) for item in items)
    width = CONCAT_WIDTH.get(columns) if columns > 1 else SINGLE_WIDTH[min(2, max(1, len(selection().shown)))]
    spec = _linked_spec([item.frame for item in items], options, columns, ema_weight(),
                        bool(st.session_state.get(LOG_KEY, False)), palette, width)
    st.vega_lite_chart(spec, width="content", key=key)


@st.cache_data(max_entries=64, show_spinner=False)
def _linked_spec(frames: list[pd.DataFrame], options: tuple[tuple[object, ...], ...], columns: int, weight: float,
                 log_y: bool, palette: tuple[tuple[str, str], ...], width: int | None) -> dict[str, object]:
    """The Vega-Lite spec of a page's linked charts, cached on the frames and options, so that a
    rerun that changes nothing (live refresh of an unchanged run, a widget elsewhere) skips altair."""
    shared = interactive.Interaction(log_y=log_y)
    built = []
    for frame, (title, y_title, color_field, dashed, zero_rule, y_domain, smooth) in zip(frames, options):
        smoothed = interactive.smooth_frame(frame, weight if smooth else 0.0, str(color_field))
        thinned, stride = interactive.thin_steps(smoothed, interactive.max_points(width))
        heading: str | alt.TitleParams = str(title)
        if stride > 1:
            heading = alt.TitleParams(str(title), subtitle=interactive.thinned_note(stride, smoothed["step"].nunique()),
                                      subtitleFontSize=10)
        built.append(interactive.series(thinned, heading, str(y_title), shared, dict(palette),
                                        color_field=str(color_field), dashed=tuple(dashed),  # type: ignore[arg-type]
                                        zero_rule=bool(zero_rule), y_domain=y_domain,  # type: ignore[arg-type]
                                        width=width))
    return interactive.to_spec(interactive.linked(built, columns))


def common_domain(frames: Sequence[pd.DataFrame], columns: Sequence[str] = ("value",)) -> tuple[float, float] | None:
    """[min, max] over several frames (equal y-ranges for charts compared side by side)."""
    values = [frame[column].to_numpy(dtype=float) for frame in frames for column in columns
              if column in frame and not frame.empty]
    finite = np.concatenate(values) if values else np.array([])
    finite = finite[np.isfinite(finite)]
    if finite.size == 0:
        return None
    low, high = float(finite.min()), float(finite.max())
    pad = 0.05 * (high - low) if high > low else 0.5
    return (low - pad, high + pad)
