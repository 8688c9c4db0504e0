"""Chart elements of the pages: heatmaps, linked time series (one run, or run and baseline side by
side) and plain charts, each with a button that downloads its data as CSV.

Specs are cached per run signature and options and sent lean; run and baseline are one Vega view
(:func:`linked_pair`, :func:`heatmap_pair`). Options come from :mod:`apps.views.ui`. Detail:
docs/app-notes.md#apps-views-uicharts.
"""

from __future__ import annotations

import io
import math
import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from apps.data import budget, curriculum, loading, scales, study
from apps.data import colours as linestyles
from apps.views import charts, interactive
from apps.views.ui import COLOUR_KEY, LOG_KEY, NATURAL_COLOURS, TOP_KEY, ema_weight, get_run, selection, shown_runs
from gdro_lab.runformat.runlog import RunData

#: Heatmap cells per chart: one run alone, and each of two runs side by side. A browser draws
#: every cell (about 0.1 ms each on a small machine), so long runs are averaged over step blocks.
HEATMAP_CELLS = {1: 2000, 2: 1000}
#: Width of each chart of a linked view (pixels; Vega-Lite cannot stretch concatenated charts to
#: their container). A row of charts fits in :data:`ROW_PX`, the main column of a 1,280 px window
#: with the sidebar open (820 px), so nothing falls off a laptop's page; on a wider window the
#: charts keep these widths. Each chart takes its plot width plus :data:`AXIS_PX` (y axis and its
#: title), charts of a row are :data:`SPACING_PX` apart, and legends sit below the plots
#: (:func:`apps.views.interactive._legend`), so they take no width. By charts per row, and for one
#: per row by the runs shown side by side (a run's column is half the row).
ROW_PX, AXIS_PX, SPACING_PX, EDGE_PX = 820, 70, 20, 10
CONCAT_WIDTH = {n: (ROW_PX - n * AXIS_PX - (n - 1) * SPACING_PX - EDGE_PX) // n for n in (2, 3)}
SINGLE_WIDTH = {1: ROW_PX - AXIS_PX - EDGE_PX, 2: (ROW_PX - 16) // 2 - AXIS_PX - EDGE_PX}
#: Width of each chart when run and baseline charts share one view (a column per run, one legend per row).
PAIR_WIDTH = {1: SINGLE_WIDTH[1], 2: CONCAT_WIDTH[2]}
#: Width of each heatmap (of one run, or of run and baseline side by side); its colour legend is below it.
HEATMAP_WIDTH = {1: SINGLE_WIDTH[1], 2: CONCAT_WIDTH[2]}


# ----------------------------------------------------------------------------- CSV export

def csv_bytes(frames: Mapping[str, pd.DataFrame]) -> bytes:
    """Charts' data as one CSV: a ``chart`` column (the chart's title), then each frame's columns
    (the union, in first-seen order; blank where a frame lacks one). Full resolution: the logged
    steps, not the thinned ones drawn."""
    parts = [frame.assign(chart=title) for title, frame in frames.items() if not frame.empty]
    if not parts:
        return b"chart\n"
    table = pd.concat(parts, ignore_index=True)
    table = table[["chart", *[column for column in table.columns if column != "chart"]]]
    buffer = io.StringIO()
    table.to_csv(buffer, index=False, float_format="%.10g")
    return buffer.getvalue().encode("utf-8")


def file_name(text: str) -> str:
    """A download's file name from a page and chart title."""
    return (re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "chart") + ".csv"


def export_button(frames: Mapping[str, pd.DataFrame], name: str, key: str) -> None:
    """A small "CSV" button under a chart that downloads its data (built only when clicked)."""
    if not any(not frame.empty for frame in frames.values()):
        return
    snapshot = {title: frame.copy() for title, frame in frames.items()}
    st.download_button("Chart data (CSV)", data=lambda: csv_bytes(snapshot), file_name=file_name(name),
                       mime="text/csv", key=f"csv-{key}", on_click="ignore", type="tertiary",
                       icon=":material/download:", help="The data of the chart above, every logged step, as CSV.")


# ----------------------------------------------------------------------------- plain charts

def chart(figure: charts.AnyChart, csv: Mapping[str, pd.DataFrame] | None = None, key: str | None = None) -> None:
    """Show an altair chart across the column's width (sent lean: :func:`apps.views.interactive.to_spec`),
    with a CSV button when ``csv`` (title -> frame) is given."""
    st.vega_lite_chart(interactive.to_spec(figure), width="stretch")
    if csv is not None:
        export_button(csv, key or next(iter(csv), "chart"), key or next(iter(csv), "chart"))


# ----------------------------------------------------------------------------- heatmaps

def heatmap_columns(run: RunData, shown: int | None = None) -> int:
    """Most heatmap columns for this run, given the cell budget of the current layout."""
    cells = HEATMAP_CELLS[min(2, max(1, shown if shown is not None else len(selection().shown)))]
    return max(50, cells // max(1, run.num_bins))


@dataclass(frozen=True)
class HeatmapColumn:
    """One run's heatmaps in a heatmap pair: (field, title) panels and the step marked on them."""

    run: RunData
    panels: Sequence[tuple[str, str]]
    selected_step: float | None = None


def heatmap_pair(columns: Sequence[HeatmapColumn], key: str) -> None:
    """The heatmaps of the run (and its baseline) as one chart element: one column per run, one
    row per field, the step axis zoomed together (drag, wheel; double-click resets), and per
    field one colour scale (natural or shared, :func:`colour_domain`). A CSV button below."""
    columns = [column for column in columns if column.panels]
    if not columns:
        return
    shown = len(columns)
    width = HEATMAP_WIDTH[min(2, shown)]
    grid = [[_one_heatmap(column.run, field, title, column.selected_step, shown, [c.run for c in columns])
             for field, title in column.panels] for column in columns]
    st.vega_lite_chart(interactive.heatmap_grid(grid, width), width="content")
    frames = {f"{column.run.path.name} {field}": curriculum.heatmap_frame(column.run, field, len(column.run.steps) or 1)
              for column in columns for field, _ in column.panels}
    export_button(frames, f"{key}-heatmaps", f"{key}-heatmaps")


def colour_domain(field: str, runs: Sequence[RunData], mode: str = "auto") -> list[float] | None:
    """A heatmap field's colour scale, the same for the run and its baseline, by the rule ``gdro report``
    uses too (:func:`apps.data.scales.heatmap_domain`): ``auto`` (default) [min, max] over both runs'
    values, so that 10 weights near 0.1 are not one block of a [0, 1] scale, and a constant field a
    scale centred on its value; ``natural`` the field's natural range (shares and weights [0, 1],
    rollouts [n_min, n_max]...), else auto. None when there is no finite value."""
    logging = [run for run in runs if curriculum.has_bins(run, field)]
    if not logging:
        return None
    values = np.concatenate([run.bins[field].reshape(-1) for run in logging])
    settings = budget.rollout_settings(logging[0])
    return scales.heatmap_domain(field, values, mode, (settings.n_min, settings.n_max))


def colour_note(field: str, domain: Sequence[float] | None, mode: str) -> str:
    """The heatmap legend's title: the field and which scale it uses."""
    if domain is None:
        return field
    low, high = domain
    return f"{field} · {'natural' if mode == 'natural' else 'auto'} {low:.3g}–{high:.3g}"


def _one_heatmap(run: RunData, field: str, title: str, selected_step: float | None, shown: int,
                 runs: Sequence[RunData]) -> dict[str, object]:
    columns = heatmap_columns(run, shown)
    block = curriculum.heatmap_block(run.steps.size, columns)
    if block > 1:
        title = f"{title} · means of {block}-step blocks"
    mode = colour_mode()
    domain = colour_domain(field, runs, mode)
    return _heatmap_spec(str(run.path), loading.run_signature(run.path), field, columns, title, selected_step,
                         tuple(domain) if domain is not None else None, colour_note(field, domain, mode))


@st.cache_data(max_entries=128, show_spinner=False)
def _heatmap_spec(path_text: str, signature: tuple[tuple[str, int, int], ...], field: str, columns: int, title: str,
                  selected_step: float | None, domain: tuple[float, ...] | None, legend_title: str = ""
                  ) -> dict[str, object]:
    """A heatmap's Vega-Lite spec, cached on the run's files and the view's options."""
    run = get_run(Path(path_text))
    figure = charts.heatmap(curriculum.heatmap_frame(run, field, columns), field, title, selected_step, domain=domain,
                            num_bins=run.num_bins, legend_title=legend_title or None)
    return interactive.to_spec(figure)


# ----------------------------------------------------------------------------- linked time series

@dataclass(frozen=True)
class Series:
    """One time-series chart: a long frame (step, <color_field>, value[, lo, hi]) and its labels.

    ``bounds`` is the metric's natural range (:func:`apps.data.scales.natural_range`): the y-axis
    stays inside it. ``colours`` fixes the colour of each name (runs and groups: by
    :mod:`apps.data.colours`); without it, names get distinct categorical colours in order.
    """

    frame: pd.DataFrame
    title: str
    y_title: str
    color_field: str = "series"
    dashed: tuple[str, ...] = ()
    zero_rule: bool = False
    y_domain: tuple[float, float] | None = None
    smooth: bool = True
    bounds: tuple[float, float] = (-math.inf, math.inf)
    colours: Mapping[str, str] | None = None
    stacked: bool = False
    x_title: str = "step"
    #: What the legend lists when it summarises many series (:func:`legend_for`); None: one entry each.
    legend: interactive.Legend | None = None
    #: A fixed x-range (run and baseline on one clock); None: the data's.
    x_domain: tuple[float, float] | None = None
    #: Charts of one zoom group zoom together (one producer's steps); others keep their own range.
    zoom_group: str = ""


def _values(frames: Sequence[pd.DataFrame], stacked: bool = False) -> np.ndarray:
    """Every value a chart draws (lines, bands, stacked totals) for its y-range."""
    parts = []
    for frame in frames:
        if frame.empty:
            continue
        if stacked:
            parts.append(frame.groupby("step")["value"].sum().to_numpy(dtype=float))
            parts.append(np.zeros(1))
            continue
        parts += [frame[column].to_numpy(dtype=float) for column in ("value", "lo", "hi", "raw") if column in frame]
    return np.concatenate(parts) if parts else np.array([])


def _names(items: Sequence[Series]) -> list[str]:
    return [str(name) for item in items for name in pd.unique(item.frame[item.color_field])]


def _row_colours(items: Sequence[Series]) -> dict[str, str]:
    """One colour map for a row of charts (the same name has the same colour in each column)."""
    colours = interactive.series_colours(_names(items))
    for item in items:
        if item.colours is not None:
            colours.update({name: colour for name, colour in item.colours.items()})
    return colours


def _domain(items: Sequence[Series]) -> tuple[float, float] | None:
    """The y-range of a row of charts: given, else :func:`apps.data.scales.y_domain` over their values."""
    given = [item.y_domain for item in items if item.y_domain is not None]
    if given:
        return (min(low for low, _ in given), max(high for _, high in given))
    first = items[0]
    return scales.y_domain(_values([item.frame for item in items], first.stacked), first.bounds,
                           zero=first.zero_rule)


#: A cell of a linked grid: the chart's options as a hashable tuple, or a placeholder's message.
Cell = tuple[object, ...]


def _cell(item: Series, domain: tuple[float, float] | None, colours: Mapping[str, str]) -> Cell:
    return ("chart", item.title, item.y_title, item.color_field, item.dashed, item.zero_rule, domain, item.smooth,
            tuple(sorted(colours.items())), item.stacked, item.x_title, item.legend, item.x_domain, item.zoom_group)


#: The x axis of the run whose column is being drawn (set by the page frame, :func:`x_axis`).
_X_AXIS: ContextVar[Callable[[Series], Series] | None] = ContextVar("x_axis", default=None)


@contextmanager
def x_axis(clock: Callable[[Series], Series]) -> Iterator[None]:
    """Within it, :func:`linked_series` draws its charts through ``clock`` (steps to the run's wall
    clock when the sidebar asks for it), like the page's other charts of that run."""
    token = _X_AXIS.set(clock)
    try:
        yield
    finally:
        _X_AXIS.reset(token)


def linked_series(items: Sequence[Series], columns: int = 1, key: str | None = None, export: str | None = None,
                  below: Sequence[Series] = (), in_column: bool = False) -> None:
    """The page's time-series charts as one linked view (``columns`` per row; ``below``: charts that
    start a row of their own under them, e.g. one whose series are not those of the others): shared
    x-zoom (drag / wheel, double-click resets), a crosshair over every series, legend isolation in
    every chart, the sidebar's EMA smoothing (raw faint) and log scale, the x axis of :func:`x_axis`;
    a CSV button with every chart's data below. ``in_column``: drawn in a run's column of a per-run
    page (half the row when a baseline is shown), else across the page."""
    clock = _X_AXIS.get() or (lambda item: item)
    items = [item for item in map(clock, items) if not item.frame.empty]
    after = [item for item in map(clock, below) if not item.frame.empty]
    if not items and not after:
        return
    shown = min(2, max(1, len(selection().shown))) if in_column else 1
    width = CONCAT_WIDTH[columns] if columns > 1 else SINGLE_WIDTH[shown]
    step = max(1, columns)
    rows = [part[start:start + step] for part in (items, after) for start in range(0, len(part), step)]
    grid = [[(item, _cell(item, _domain([item]), _row_colours([item]))) for item in row] for row in rows]
    _draw_grid(grid, width, key)
    export_button({item.title: _export_frame(item) for item in [*items, *after]}, export or key or "charts",
                  key or "charts")


def linked_pair(columns: Sequence[Sequence[Series]], key: str, export: str | None = None,
                labels: Sequence[str] = ()) -> None:
    """Time-series charts of the run and its baseline as one view: a row per chart title (in the
    run's order, then titles only the baseline has), a column per run; a run that lacks a chart
    gets a placeholder. Each row shares its y-range and colours; zoom and crosshair act on all.
    ``labels`` name the columns in the CSV."""
    columns = [[item for item in column if not item.frame.empty] for column in columns]
    if not any(columns):
        return
    titles = list(dict.fromkeys(item.title for column in columns for item in column))
    width = PAIR_WIDTH[min(2, max(1, len(columns)))]
    grid: list[list[tuple[Series | None, Cell]]] = []
    for title in titles:
        row = [next((item for item in column if item.title == title), None) for column in columns]
        present = [item for item in row if item is not None]
        domain, colours = _domain(present), _row_colours(present)
        grid.append([(item, _cell(item, domain, colours)) if item is not None
                     else (None, ("placeholder", f"{title}: not logged by this run")) for item in row])
    _draw_grid(grid, width, key)
    names = list(labels) or [f"column {index}" for index in range(len(columns))]
    frames = {f"{name}: {item.title}": _export_frame(item) for name, column in zip(names, columns) for item in column}
    export_button(frames, export or key, key)


def _export_frame(item: Series) -> pd.DataFrame:
    """A chart's data as exported: every logged step, smoothed values next to the raw ones."""
    frame = item.frame
    weight = ema_weight() if item.smooth else 0.0
    smoothed = interactive.smooth_frame(frame, weight, item.color_field)
    return smoothed.rename(columns={"step": item.x_title.replace(" ", "_")}) if item.x_title != "step" else smoothed


def _draw_grid(grid: Sequence[Sequence[tuple[Series | None, Cell]]], width: int | None, key: str | None) -> None:
    frames = [item.frame if item is not None else pd.DataFrame() for row in grid for item, _ in row]
    layout = tuple(tuple(cell for _, cell in row) for row in grid)
    spec = _grid_spec(frames, layout, ema_weight(), bool(st.session_state.get(LOG_KEY, False)), width)
    st.vega_lite_chart(spec, width="content", key=key)


@st.cache_data(max_entries=64, show_spinner=False)
def _grid_spec(frames: list[pd.DataFrame], layout: tuple[tuple[Cell, ...], ...], weight: float, log_y: bool,
               width: int | None) -> dict[str, object]:
    """The Vega-Lite spec of a grid of linked charts, cached on the frames and options, so that a
    rerun that changes nothing (live refresh of an unchanged run, a widget elsewhere) skips altair."""
    shared = interactive.Interaction(log_y=log_y)
    rows, index = [], 0
    for row in layout:
        built = []
        for cell in row:
            frame = frames[index]
            index += 1
            if cell[0] == "placeholder":
                built.append(interactive.placeholder(str(cell[1]), width))
                continue
            (_, title, y_title, color_field, dashed, zero_rule, domain, smooth, palette, stacked, x_title, legend,
             x_domain, zoom_group) = cell
            smoothed = interactive.smooth_frame(frame, weight if smooth and not stacked else 0.0, str(color_field))
            heading: str | alt.TitleParams = str(title)
            lines = smoothed[str(color_field)].nunique() if not smoothed.empty else 0
            if lines > interactive.LEGEND_MAX and not stacked:  # no per-line labels: lines need not share steps
                limit = interactive.line_points(lines, width)
                thinned, longest = interactive.bucket_extremes(smoothed, limit, str(color_field))
                if longest:
                    heading = alt.TitleParams(str(title), subtitle=interactive.reduced_note(limit, longest),
                                              subtitleFontSize=10)
            else:
                thinned, stride = interactive.thin_steps(smoothed, interactive.max_points(width))
                if stride > 1:
                    heading = alt.TitleParams(str(title), subtitle=interactive.thinned_note(
                        stride, smoothed["step"].nunique()), subtitleFontSize=10)
            built.append(interactive.series(thinned, heading, str(y_title), shared,
                                            dict(palette),  # type: ignore[call-overload]
                                            color_field=str(color_field), dashed=tuple(dashed),  # type: ignore[arg-type]
                                            zero_rule=bool(zero_rule), y_domain=domain,  # type: ignore[arg-type]
                                            width=width, x_title=str(x_title), stacked=bool(stacked),
                                            legend=legend, x_domain=x_domain,  # type: ignore[arg-type]
                                            zoom_group=str(zoom_group)))
        rows.append(built)
    return interactive.linked_rows(rows)


# ----------------------------------------------------------------------------- wall clock

#: Wall-clock units: (name, seconds per unit, the longest clock, in seconds, drawn in this unit).
CLOCK_UNITS = (("s", 1.0, 120.0), ("min", 60.0, 2 * 3600.0), ("h", 3600.0, math.inf))


def clock_unit(longest_s: float) -> tuple[str, float]:
    """(unit, seconds per unit) for clocks up to ``longest_s`` seconds: seconds up to 2 minutes,
    minutes up to 2 hours, then hours (a 2-minute run reads "0-120 s", not "0.008 h")."""
    for name, factor, limit in CLOCK_UNITS:
        if longest_s <= limit:
            return name, factor
    return CLOCK_UNITS[-1][0], CLOCK_UNITS[-1][1]


def longest_clock(clocks: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> float:
    """The longest elapsed time (seconds) among ``clocks`` (0 when none)."""
    ends = [float(np.nanmax(seconds)) for _, seconds in clocks.values() if np.size(seconds)]
    return max(ends, default=0.0)


def on_wall_clock(item: Series, clocks: Mapping[str, tuple[np.ndarray, np.ndarray]], run_field: str | None = None,
                  longest_s: float | None = None) -> Series:
    """``item`` with its steps replaced by the time since the run started (``clocks``: run label ->
    (logged steps, elapsed seconds)), on the shared range [0, ``longest_s``] in :func:`clock_unit`'s unit.
    Rows of a run without a clock are dropped; ``run_field`` names the run column (None: one run).
    """
    frame = item.frame.copy()
    if frame.empty:
        return item
    longest = longest_clock(clocks) if longest_s is None else longest_s
    unit, factor = clock_unit(longest)
    elapsed = np.full(len(frame), np.nan)
    owners = frame[run_field].astype(str).to_numpy() if run_field else np.array([next(iter(clocks), "")] * len(frame))
    for owner, (steps, seconds) in clocks.items():
        mask = owners == owner
        if mask.any():
            elapsed[mask] = np.interp(frame["step"].to_numpy(dtype=float)[mask], steps, seconds) / factor
    frame["step"] = elapsed
    frame = frame[np.isfinite(elapsed)].reset_index(drop=True)
    return replace(item, frame=frame, x_title=f"wall clock ({unit})", x_domain=(0.0, max(longest / factor, 1e-9)),
                   zoom_group=f"clock {item.zoom_group}".strip())


def bounds_for(metric: str, runs: Sequence[RunData], frame: pd.DataFrame | None = None) -> tuple[float, float]:
    """The natural range of a metric over these runs (:func:`apps.data.scales.natural_range`)."""
    values = frame["value"].to_numpy(dtype=float) if frame is not None and "value" in frame else None
    bins = max((run.num_bins for run in runs), default=None)
    return scales.natural_range(metric, bins, values)


@dataclass
class Parts:
    """What a per-run view shows of one run besides what it draws in the run's column at once:
    heatmaps (one element for run and baseline), content drawn in the column between heatmaps
    and time series (``middle``) and after them (``bottom``), and the time-series charts (one
    linked view for run and baseline)."""

    heatmaps: Sequence[tuple[str, str]] = ()
    selected_step: float | None = None
    middle: Callable[[], None] | None = None
    series: Sequence[Series] = field(default_factory=list)
    bottom: Callable[[], None] | None = None


def bar_domain(field_name: str) -> tuple[float, float] | None:
    """The value axis of a per-bin field's bars, the same for the run and its baseline: from 0 (or
    the lowest value, when negative) to the highest value either run logs at any step."""
    runs = [run for run in shown_runs() if curriculum.has_bins(run, field_name)]
    if not runs:
        return None
    values = np.concatenate([run.bins[field_name].reshape(-1) for run in runs])
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return None
    low, high = min(0.0, float(finite.min())), max(0.0, float(finite.max()))
    return (low, high) if high > low else None


def colour_mode() -> str:
    """The sidebar's heatmap colour scale: ``auto`` (the data's range) or ``natural``."""
    return "natural" if st.session_state.get(COLOUR_KEY) == NATURAL_COLOURS else "auto"


# ----------------------------------------------------------------------------- many series

def top_groups() -> int:
    """How many groups a chart keeps apart (the sidebar's choice, at most 20)."""
    return max(1, min(int(st.session_state.get(TOP_KEY, linestyles.MAX_STYLES)), linestyles.MAX_STYLES))


def legend_for(names: Sequence[str], group_of: Mapping[str, str], method_of: Mapping[str, str],
               rank: Sequence[str] = (), top_k: int | None = None, ranked_by: str = "") -> interactive.Legend:
    """The legend of a chart of ``names`` (runs, or groups when ``group_of`` maps each to itself).

    Up to ``top_k`` groups (the sidebar's, at most :data:`apps.data.colours.MAX_STYLES`) each get
    their own colour and dash (:func:`apps.data.colours.group_styles`): one entry per series up to
    :data:`apps.views.interactive.LEGEND_MAX` series (seeds of a group in shades of its colour), else
    one per group. With more groups, the first ``top_k`` of ``rank`` (e.g. by a final metric,
    ``ranked_by`` names it; groups not in ``rank`` follow in their order) and one muted "others"
    entry for the rest."""
    k = top_groups() if top_k is None else max(1, min(top_k, linestyles.MAX_STYLES))
    groups = list(dict.fromkeys(group_of.get(name, name) for name in names))
    method_of_group = {group_of.get(name, name): method_of.get(name, "") for name in names}
    ordered = [group for group in rank if group in method_of_group]
    ordered += [group for group in groups if group not in set(ordered)]
    styles = linestyles.group_styles(ordered, method_of_group, k)
    if len(groups) <= k and len(names) <= interactive.LEGEND_MAX:
        members: dict[str, list[str]] = {}
        for name in names:
            members.setdefault(group_of.get(name, name), []).append(name)
        shades = {name: linestyles.shade(styles[group][0], position, len(runs))
                  for group, runs in members.items() for position, name in enumerate(runs)}
        return interactive.Legend(tuple(names), tuple(shades[name] for name in names), {},
                                  dashes=tuple(styles[group_of.get(name, name)][1] for name in names))
    if len(groups) <= k:
        note = f"{len(names)} runs: one entry per group (click to isolate)" if len(groups) < len(names) else ""
        return interactive.Legend(tuple(groups), tuple(styles[group][0] for group in groups),
                                  {name: group_of.get(name, name) for name in names}, note,
                                  dashes=tuple(styles[group][1] for group in groups))
    kept = ordered[:k]
    by = f" by {ranked_by}" if ranked_by else ""
    note = f"{len(groups)} groups: the top {len(kept)}{by}, {len(groups) - len(kept)} more as '{linestyles.OTHERS}'"
    entries = (*kept, linestyles.OTHERS)
    return interactive.Legend(entries, tuple(styles[group][0] for group in kept) + (linestyles.OTHERS_COLOUR,),
                              {name: group_of.get(name, name) if group_of.get(name, name) in set(kept) else linestyles.OTHERS
                               for name in names}, note,
                              dashes=tuple(styles[group][1] for group in kept) + (linestyles.OTHERS_DASH,),
                              others=linestyles.OTHERS)


def rank_by_final(members: Mapping[str, Sequence[RunData]], metric: str) -> list[str]:
    """Groups (``members``: group -> its runs) by the mean final value of ``metric`` over their runs
    (:func:`apps.data.study.final_value`), highest first: the top k a chart keeps apart."""
    scores = {}
    for group, runs in members.items():
        finals = [study.final_value(run, metric) for run in runs]
        finite = [value for value in finals if np.isfinite(value)]
        scores[group] = float(np.mean(finite)) if finite else float("nan")
    return linestyles.rank_groups(list(members), scores)


def split_by_producer(item: Series, producer_of: Mapping[str, str], field_name: str) -> list[Series]:
    """``item`` as one chart per producer of its series (``producer_of``: series name -> producer),
    each on its own x-range and zoom: a trainer's 6 steps are never squeezed beside a simulator's
    400. One producer: ``item`` itself."""
    if item.frame.empty:
        return [item]
    owners = item.frame[field_name].astype(str).map(lambda name: producer_of.get(name, ""))
    producers = list(dict.fromkeys(owners))
    if len(producers) <= 1:
        return [item]
    return [replace(item, frame=item.frame[(owners == producer).to_numpy()].reset_index(drop=True),
                    title=f"{item.title} · {producer or 'unknown producer'}", zoom_group=producer or "unknown")
            for producer in producers]
