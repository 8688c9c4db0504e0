"""Interactive time-series charts: linked x-zoom, a crosshair over every run, EMA smoothing, bands.

The charts of a page share one :class:`Interaction` and are concatenated into one Vega-Lite view
(:func:`linked`): shared x pan/zoom, a crosshair with a label per series, smoothed series (:func:`ema`)
over faint raw ones, mean ± 95% bands, thinning (:func:`thin_steps`) and lean specs (:func:`lean`).
y-ranges come from :func:`apps.data.scales.y_domain`. No Streamlit here. Behaviour in full:
docs/app-notes.md#apps-views-interactive.
"""

from __future__ import annotations

import hashlib
import math
import os
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import altair as alt
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from altair.utils.data import to_values

from apps.views.charts import CHART_HEIGHT, AnyChart

#: Distinct categorical colours for series that are not runs (tableau10): neighbours in the
#: list differ in hue, so "actual" / "square-root optimum" or "pooled" / "worst group" never look alike.
SERIES_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                  "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd")
ZOOM, CROSSHAIR = "xzoom", "crosshair"
#: Layers carrying the zoom / crosshair are marked with this description prefix until :func:`to_spec`.
MARKER = "gdro-param:"
#: Rows kept only at the hovered step (a reference to the crosshair parameter, empty = nothing).
HOVERED = alt.ParameterPredicate(param=CROSSHAIR, empty=False)
RAW_OPACITY = 0.25
BAND_OPACITY = 0.18
#: ``GDRO_APP_RENDERER=svg`` draws linked views as SVG (the browser tests read axis ticks and
#: crosshair labels from the DOM); the default is Vega's canvas renderer, much faster on long runs.
RENDERER_ENV = "GDRO_APP_RENDERER"
#: Thinning: at least this many points per series, else one point per this many pixels of width.
MIN_POINTS, PIXELS_PER_POINT = 150, 2
DEFAULT_WIDTH = 1000


def series_colours(names: Iterable[str]) -> dict[str, str]:
    """Distinct categorical colours for series names, in the order given (first seen)."""
    ordered = list(dict.fromkeys(str(name) for name in names))
    return {name: SERIES_PALETTE[index % len(SERIES_PALETTE)] for index, name in enumerate(ordered)}


def ema(values: np.ndarray, weight: float) -> np.ndarray:
    """TensorBoard's debiased exponential moving average, NaN-aware, shape (T,) -> (T,).

    s_t = weight · s_{t-1} + (1 − weight) · x_t, reported as s_t / (1 − weight^{n_t}) where n_t
    counts the finite values so far (no pull toward 0 at the start); NaN inputs stay NaN and do
    not update the average. ``weight`` = 0 returns the values unchanged.
    """
    out = np.array(values, dtype=float, copy=True)
    if weight <= 0.0:
        return out
    state, seen = 0.0, 0
    for t, value in enumerate(out):
        if not np.isfinite(value):
            continue
        state = weight * state + (1.0 - weight) * value
        seen += 1
        out[t] = state / (1.0 - weight ** seen)
    return out


def smooth_frame(frame: pd.DataFrame, weight: float, group_field: str) -> pd.DataFrame:
    """Replace ``value`` (and ``lo``/``hi``) by their EMA per group and keep the logged values in
    ``raw``; with ``weight`` 0 the frame is only sorted (no ``raw`` column: nothing to draw faint)."""
    if frame.empty:
        return frame
    ordered = frame.sort_values([group_field, "step"]).reset_index(drop=True)
    if weight <= 0.0:
        return ordered
    ordered["raw"] = ordered["value"]
    for column in ("value", "lo", "hi"):
        if column in ordered:
            ordered[column] = ordered.groupby(group_field, sort=False)[column].transform(
                lambda values: ema(values.to_numpy(dtype=float), weight))
    return ordered


def max_points(width: int | None) -> int:
    """Most points per series a chart ``width`` pixels wide is sent (see :func:`thin_steps`)."""
    return max(MIN_POINTS, (width or DEFAULT_WIDTH) // PIXELS_PER_POINT)


def thin_steps(frame: pd.DataFrame, limit: int) -> tuple[pd.DataFrame, int]:
    """Rows at every k-th step of the frame's steps (the first and the last always kept), k the
    smallest stride leaving at most ``limit`` steps; returns (rows, k). Every series of the frame
    keeps the same steps, so the crosshair finds all of them at each kept step."""
    if frame.empty:
        return frame, 1
    steps = np.unique(frame["step"].to_numpy(dtype=float))
    stride = max(1, math.ceil(steps.size / max(2, limit)))
    if stride == 1:
        return frame, 1
    kept = steps[::stride]
    if kept[-1] != steps[-1]:
        kept = np.append(kept, steps[-1])
    return frame[frame["step"].isin(kept)].reset_index(drop=True), stride


def thinned_note(stride: int, steps: int) -> str:
    """The subtitle of a thinned chart."""
    return f"1 in {stride} of {steps} logged steps drawn (exact values; zoom does not add points)"


#: Charts of more than :data:`LEGEND_MAX` lines (no per-line crosshair labels) are drawn with at most
#: this many points in all, each line with at least :data:`MIN_LINE_POINTS`: the browser's work grows
#: with the points (every point of a line is an item that Vega encodes), not with the pixels.
MANY_LINES_POINTS, MIN_LINE_POINTS = 1500, 24
#: Columns whose lowest and highest value per stretch of steps a reduced line keeps.
EXTREME_COLUMNS = ("value", "raw", "lo", "hi")


def line_points(lines: int, width: int | None) -> int:
    """Most points per line of a chart of ``lines`` lines, ``width`` pixels wide (see :func:`bucket_extremes`)."""
    return max(MIN_LINE_POINTS, min(max_points(width), MANY_LINES_POINTS // max(1, lines)))


def _extreme_rows(values_NC: np.ndarray, limit: int) -> np.ndarray:
    """Row indices kept of one line (rows in step order, ``C`` columns): the first and the last row,
    and in each of ``(limit - 2) // 2`` stretches of rows between them the rows of each column's
    lowest and highest value (its first such row; the stretch's first row where a column has no
    finite value). One pass per column and extreme over all stretches (``reduceat``), not a loop over
    stretches (tests/apps/views/test_app_many_lines.py holds it equal to that loop)."""
    count = values_NC.shape[0]
    if count <= limit:
        return np.arange(count)
    edges = np.linspace(1, count - 1, max(1, (limit - 2) // 2) + 1).astype(int)
    starts, stops = edges[:-1], edges[1:]
    filled = stops > starts  # an empty stretch keeps nothing
    starts, stops = starts[filled], stops[filled]
    kept = [np.array([0, count - 1])]
    if starts.size:
        first, part = int(starts[0]), values_NC[starts[0]:stops[-1]]  # the stretches tile this part
        stretch_N = np.repeat(np.arange(starts.size), stops - starts)
        finite = np.isfinite(part)
        for missing, extreme in ((np.inf, np.minimum), (-np.inf, np.maximum)):
            values = np.where(finite, part, missing)
            hit_NC = values == extreme.reduceat(values, starts - first, axis=0)[stretch_N]
            for column in range(part.shape[1]):
                rows = np.flatnonzero(hit_NC[:, column])  # every stretch has one: its extreme, or all rows
                kept.append(first + rows[np.unique(stretch_N[rows], return_index=True)[1]])
    return np.unique(np.concatenate(kept))


def bucket_extremes(frame: pd.DataFrame, limit: int, group_field: str) -> tuple[pd.DataFrame, int]:
    """Each line of the frame (rows of one ``group_field`` value) with more than ``limit`` rows reduced
    to its first and last row and, per stretch of steps between them, the rows of its lowest and
    highest value (and of ``raw``, ``lo``, ``hi`` where present): the line's range is drawn as
    logged, with about ``limit`` points (more with several columns). Returns (rows in the frame's
    order, the longest line's logged length, 0 when no line was reduced). Kept rows are logged
    values, unchanged."""
    if frame.empty:
        return frame, 0
    frame = frame.reset_index(drop=True)
    columns = [column for column in EXTREME_COLUMNS if column in frame]
    ordered = frame.sort_values([group_field, "step"], kind="stable")
    positions = ordered.index.to_numpy()
    values_NC = ordered[columns].to_numpy(dtype=float)
    codes, starts = np.unique(ordered[group_field].astype(str).to_numpy(), return_index=True)
    bounds = np.append(np.sort(starts), len(ordered))
    if int(np.diff(bounds).max()) <= limit:
        return frame, 0
    kept = [start + _extreme_rows(values_NC[start:stop], limit) for start, stop in zip(bounds[:-1], bounds[1:])]
    rows = np.sort(positions[np.concatenate(kept)])
    return frame.iloc[rows].reset_index(drop=True), int(np.diff(bounds).max())


def reduced_note(limit: int, longest: int) -> str:
    """The subtitle of a chart whose lines :func:`bucket_extremes` reduced."""
    return f"about {limit} of up to {longest} points a line drawn: each stretch's lowest and highest"


@dataclass
class Interaction:
    """What one page's charts share: the log-scale choice, linked x-zoom and the step crosshair.

    Charts mark the layers that carry them (``description`` = ``gdro-param:zoom`` / ``gdro-param:hover``);
    :func:`to_spec` declares both parameters once (docs/app-notes.md#apps-views-interactive).
    """

    log_y: bool = False


#: Legend entries shown one per series up to this many; beyond, the caller summarises them by
#: group or method (:class:`Legend`), so a legend never outgrows the plot beside it.
LEGEND_MAX = 12
#: Legends sit below their row of plots, so a plot keeps its width whatever the names: each entry
#: gets this many pixels (symbol and label), and a label longer than :data:`LEGEND_CHARS` characters
#: is cut in its middle ("study: prompt_gdro…seed 3"); hovering an entry shows its full name.
LEGEND_ENTRY_PX = 300
LEGEND_CHARS = 42
#: Width of a legend's title (its note on how entries summarise the series).
LEGEND_PX = 300
#: Opacity of series whose legend entry is not the one clicked (click an entry to isolate it,
#: shift-click to add another, double-click the plot or click empty legend space to show all).
DIMMED = 0.07
ISOLATE, HIGHLIGHT = "isolate", "highlight"
#: Columns every time-series frame gets: the legend entry a series belongs to, and its own name.
LEGEND_FIELD, LINE_FIELD = "legend", "line"


@dataclass(frozen=True)
class Legend:
    """What a chart's legend lists: ``entries`` (in order) with their colours, and the entry of
    each series (``entry_of``; a series missing from it is its own entry). ``note`` says how the
    legend summarises the series (e.g. "one entry per group: 26 runs")."""

    entries: tuple[str, ...]
    colours: tuple[str, ...]
    entry_of: Mapping[str, str]
    note: str = ""
    #: Each entry's dash pattern (pixels on, off; empty: solid), or () when every line is solid: with
    #: colours, what keeps up to 20 groups apart (:func:`apps.data.colours.group_styles`).
    dashes: tuple[tuple[int, ...], ...] = ()
    #: The entry of the groups beyond the top k (one muted style, drawn first, no band), if any.
    others: str = ""


def _parameters(zoom_views: Mapping[str, list[str]], hover_views: list[str], legend_views: list[str],
                line_views: list[str]) -> list[dict[str, Any]]:
    """The top-level parameters with the views that carry them: one x-zoom per zoom group (charts
    whose x ranges belong together: one producer's steps, one clock), the step crosshair, the
    legend isolation and the hovered line."""
    params: list[dict[str, Any]] = []
    for group, views in zoom_views.items():
        if views:
            params.append({"name": ZOOM if not group else f"{ZOOM}_{group}", "select": {"type": "interval",
                           "encodings": ["x"]}, "bind": "scales", "views": views})
    if hover_views:
        params.append({"name": CROSSHAIR, "select": {"type": "point", "nearest": True, "on": "pointerover",
                                                     "fields": ["step"], "clear": "pointerout"},
                       "views": hover_views})
    if legend_views:
        params.append({"name": ISOLATE, "select": {"type": "point", "fields": [LEGEND_FIELD]}, "bind": "legend",
                       "views": legend_views})
    if line_views:
        params.append({"name": HIGHLIGHT, "select": {"type": "point", "fields": [LINE_FIELD], "on": "pointerover",
                                                     "clear": "pointerout"}, "views": line_views})
    return params


def _y_scale(frame: pd.DataFrame, log_y: bool, domain: Sequence[float] | None) -> alt.Scale:
    options: dict[str, Any] = {"zero": False}
    if log_y:
        columns = [column for column in ("value", "lo", "hi", "raw") if column in frame]
        values = frame[columns].to_numpy(dtype=float) if columns else np.array([])
        options["type"] = "log" if values.size and np.nanmin(values) > 0 else "symlog"
    if domain is not None:
        options["domain"] = list(domain)
    return alt.Scale(**options)


def legend_columns(width: int | None) -> int:
    """Entries per row of a legend under a plot ``width`` pixels wide (at least 1)."""
    return max(1, (width or DEFAULT_WIDTH) // LEGEND_ENTRY_PX)


def _legend(areas: bool = False, title: str | None = None, width: int | None = None) -> alt.Legend:
    """A legend below the plot (it never takes the plot's room), :func:`legend_columns` entries per
    row; a long name cut in its middle to :data:`LEGEND_CHARS` characters, its full name on hover;
    line strokes, or filled squares for stacked areas."""
    common: dict[str, Any] = {"orient": "bottom", "direction": "horizontal", "columns": legend_columns(width),
                              "labelLimit": LEGEND_ENTRY_PX - 30, "symbolLimit": 0,
                              "labelExpr": f"truncate(datum.label, {LEGEND_CHARS}, 'center')",
                              "title": title, "titleLimit": min(LEGEND_PX, width or LEGEND_PX), "titleFontSize": 10,
                              "titleFontWeight": "normal", "titleOrient": "top"}
    if areas:
        return alt.Legend(symbolType="square", symbolOpacity=1.0, **common)
    return alt.Legend(symbolType="stroke", symbolStrokeWidth=3, symbolOpacity=1.0, **common)


#: Vega-Lite's legend ``encoding`` (absent from altair's schema, so :func:`to_spec` adds it): an
#: entry's full name as its tooltip, on the symbol and on the (possibly cut) label. (A legend's Vega
#: ``encode`` would replace the names Vega-Lite gives the entries, and a click would isolate nothing.)
LEGEND_TOOLTIP = {part: {"tooltip": {"value": {"expr": "datum.value"}}} for part in ("symbols", "labels")}


def default_legend(names: Sequence[str], colours: Mapping[str, str]) -> Legend:
    """A legend with one entry per series (its own colour, or a distinct categorical one)."""
    fallback = series_colours(names)
    return Legend(tuple(names), tuple(colours.get(name, fallback[name]) for name in names), {})


def step_axis(x_title: str) -> alt.Axis:
    """The x axis: integer ticks for steps (never 1.5, 2.5), 4 significant digits for clocks."""
    if x_title == "step":
        return alt.Axis(tickMinStep=1, format="d")
    return alt.Axis(format=".4~g")


def series(frame: pd.DataFrame, title: str | alt.TitleParams, y_title: str, interaction: Interaction,
           colours: Mapping[str, str], color_field: str = "series", dashed: Sequence[str] = (),
           zero_rule: bool = False, y_domain: Sequence[float] | None = None, width: int | None = None,
           x_title: str = "step", stacked: bool = False, legend: Legend | None = None,
           x_domain: Sequence[float] | None = None, zoom_group: str = "") -> AnyChart:
    """One interactive time-series chart of a long frame (step, <color_field>, value[, raw, lo, hi]).

    ``y_domain`` / ``x_domain`` fix the ranges; the x field is ``step`` whatever ``x_title`` says;
    ``legend`` summarises many series; charts of one ``zoom_group`` zoom together. Layers and the legend:
    docs/app-notes.md#apps-views-interactive.
    """
    names = [str(name) for name in pd.unique(frame[color_field])] if not frame.empty else []
    legend = legend or default_legend(names, colours)
    keep = [column for column in ("step", color_field, "value", "raw", "lo", "hi") if column in frame]
    frame = frame[keep].assign(**{LEGEND_FIELD: [legend.entry_of.get(str(name), str(name))
                                                 for name in frame[color_field]],
                                  LINE_FIELD: frame[color_field].astype(str)})
    if legend.others:  # the muted "others" first, so that they are drawn under every kept group
        frame = frame.iloc[np.argsort((frame[LEGEND_FIELD] != legend.others).to_numpy(), kind="stable")]
    scale = alt.Scale(domain=list(legend.entries), range=list(legend.colours))
    colour = alt.Color(f"{LEGEND_FIELD}:N", legend=_legend(areas=stacked, title=legend.note or None, width=width),
                       scale=scale,
                       sort=list(legend.entries))
    # with dashes, one legend shows both (Vega-Lite merges the legends of one field)
    dash: dict[str, Any] = {} if stacked or not any(legend.dashes) else {"strokeDash": alt.StrokeDash(
        f"{LEGEND_FIELD}:N", scale=alt.Scale(domain=list(legend.entries), range=[list(d) for d in legend.dashes]),
        sort=list(legend.entries), legend=_legend(title=legend.note or None, width=width))}
    x_scale = alt.Scale(zero=False, nice=False)
    if x_domain:
        x_scale.domain = list(x_domain)
    x = alt.X("step:Q", title=x_title, axis=step_axis(x_title), scale=x_scale)
    domain = None if interaction.log_y else y_domain
    y_scale = _y_scale(frame, interaction.log_y, domain)
    y = alt.Y("value:Q", title=y_title, scale=y_scale, axis=alt.Axis(format=".4~g"),
              stack="zero" if stacked else None)
    isolated = alt.condition(alt.ParameterPredicate(param=ISOLATE), alt.value(1.0), alt.value(DIMMED))
    zoom = f"{MARKER}zoom" + (f"@{zoom_group}" if zoom_group else "")
    base = alt.Chart()  # every layer reads the chart's one dataset (passed to alt.layer below)
    layers: list[Any] = []
    if stacked:
        order = alt.Order("series_order:Q")
        layers.append(base.transform_calculate(series_order=f"indexof({names!r}, datum['{color_field}'])")
                      .mark_area(clip=True).encode(x=x, y=y, color=colour, order=order, detail=f"{LINE_FIELD}:N",
                                                   opacity=alt.condition(alt.ParameterPredicate(param=ISOLATE),
                                                                         alt.value(0.85), alt.value(DIMMED)))
                      .properties(description=f"{zoom}|legend"))
    else:
        faint = RAW_OPACITY
        if "raw" in frame and not np.allclose(frame["raw"].to_numpy(dtype=float),
                                              frame["value"].to_numpy(dtype=float), equal_nan=True):
            layers.append(base.mark_line(clip=True, strokeWidth=1).encode(
                x=x, y=alt.Y("raw:Q", scale=y_scale), color=colour, detail=f"{LINE_FIELD}:N", **dash,
                opacity=alt.condition(alt.ParameterPredicate(param=ISOLATE), alt.value(faint), alt.value(DIMMED / 2))))
        if "lo" in frame and frame["lo"].notna().any():
            banded = "isValid(datum.lo) && isValid(datum.hi)" + (
                f" && datum.{LEGEND_FIELD} !== {legend.others!r}" if legend.others else "")
            layers.append(base.transform_filter(banded).mark_area(clip=True).encode(
                x=x, y=alt.Y("lo:Q", scale=y_scale), y2="hi:Q", color=colour, detail=f"{LINE_FIELD}:N",
                opacity=alt.condition(alt.ParameterPredicate(param=ISOLATE), alt.value(band_opacity(names)),
                                      alt.value(DIMMED / 3))))
        solid = [name for name in names if name not in dashed]
        width_when = alt.condition(alt.ParameterPredicate(param=HIGHLIGHT, empty=False), alt.value(4.0),
                                   alt.value(2.0))
        line = base.mark_line(clip=True).encode(x=x, y=y, color=colour, detail=f"{LINE_FIELD}:N", opacity=isolated,
                                                strokeWidth=width_when, **dash,
                                                tooltip=[alt.Tooltip(f"{LINE_FIELD}:N", title=_tip_title(color_field)),
                                                         alt.Tooltip(f"{LEGEND_FIELD}:N", title="legend")])
        if len(solid) < len(names):  # a filter that keeps every row still costs the browser a test per row
            line = line.transform_filter(alt.FieldOneOfPredicate(field=color_field, oneOf=solid))
        layers.append(line.properties(description=f"{zoom}|legend|line"))
        if dashed:
            layers.append(base.mark_line(clip=True, strokeWidth=3, strokeDash=[6, 4]).encode(
                x=x, y=y, color=colour, detail=f"{LINE_FIELD}:N", opacity=isolated)
                .transform_filter(alt.FieldOneOfPredicate(field=color_field, oneOf=list(dashed))))
    if zero_rule:  # under the series: a series at 0 (e.g. no reduction at all) stays visible on it
        layers.insert(0, alt.Chart().mark_rule(color="gray").encode(y=alt.datum(0.0)))
    layers += _crosshair(base, frame, names, color_field, x, y, colour, x_title,
                         labelled=not stacked and len(names) <= LEGEND_MAX)
    chart = alt.LayerChart(layer=layers, data=frame, title=title, height=CHART_HEIGHT)
    if width is not None:
        chart.width = width
    return chart


#: Band opacity with many bands drawn: overlapping bands stay apart by their own colours.
MANY_BANDS, MANY_BANDS_OPACITY = 6, 0.1


def band_opacity(names: Sequence[str]) -> float:
    """The opacity of each band: :data:`BAND_OPACITY`, lower with :data:`MANY_BANDS` series or more."""
    return BAND_OPACITY if len(names) < MANY_BANDS else MANY_BANDS_OPACITY


def _tip_title(color_field: str) -> str:
    return {"run": "run", "method": "group", "series": "series"}.get(color_field, color_field)


#: Crosshair labels: one row per series, this many pixels apart, from this many pixels below the top.
LABEL_ROW_PX, LABEL_TOP_PX = 13, 10
#: What the tooltip says for a series that logs no value at the hovered step (it ended, or
#: logs less often).
NO_VALUE = "—"


def _crosshair(base: alt.Chart, frame: pd.DataFrame, names: list[str], color_field: str, x: alt.X, y: alt.Y,
               colour: alt.Color, x_title: str = "step", labelled: bool = True) -> list[Any]:
    """Invisible hover targets carrying the tooltip (every series' value at the nearest step, "—"
    for a series without one; with more than :data:`LEGEND_MAX` series only the step: hovering a
    line names it), the rule, dots on the series, and one label row per series (highest value on
    top) when ``labelled``."""
    if frame.empty:
        return []
    # One invisible target per step (not per step and series): the nearest-step search and the
    # DOM stay small on long runs. Vega-Lite's nearest-point search gives every target a Voronoi
    # cell over the whole plot, and the cell shows the target's tooltip: hovering anywhere shows
    # every series' value at that step.
    tooltip = [alt.Tooltip("step:Q", title=x_title, format=".4~g")]
    if len(names) <= LEGEND_MAX:
        per_step = base.transform_pivot(color_field, value="value", groupby=["step"]).transform_calculate(
            **{f"tip_{index}": f"isValid(datum[{name!r}]) && isFinite(datum[{name!r}]) ? "
                               f"format(datum[{name!r}], '.4~g') : '{NO_VALUE}'" for index, name in enumerate(names)})
        tooltip += [alt.Tooltip(f"tip_{index}:N", title=name) for index, name in enumerate(names)]
    else:
        per_step = base.transform_aggregate(groupby=["step"])
    targets = per_step.mark_point(opacity=0, size=40).encode(x=x, y=alt.value(0), tooltip=tooltip).properties(
        description=f"{MARKER}hover")
    rule = per_step.mark_rule(color="#555555", strokeWidth=1).encode(x=x, tooltip=tooltip).transform_filter(HOVERED)
    if not labelled:
        return [targets, rule]
    dots = base.mark_point(filled=True, size=45).encode(x=x, y=y, color=colour).transform_filter(HOVERED)
    steps = frame["step"].to_numpy(dtype=float)
    middle = float(np.nanmin(steps) + np.nanmax(steps)) / 2 if steps.size else 0.0
    rows = base.transform_filter(HOVERED).transform_filter("isValid(datum.value)").transform_window(
        label_row="row_number()", sort=[alt.SortField("value", order="descending")], groupby=["step"]
    ).transform_calculate(
        crosshair_label=f"datum['{color_field}'] + ': ' + format(datum.value, '.4~g')",
        label_y=f"{LABEL_TOP_PX} + {LABEL_ROW_PX} * (datum.label_row - 1)")
    label_y = alt.Y("label_y:Q", scale=None)
    left = rows.transform_filter(f"datum.step <= {middle!r}").mark_text(
        align="left", dx=7, fontSize=11, fontWeight="bold", baseline="middle", limit=260).encode(
        x=x, y=label_y, text="crosshair_label:N", color=colour)
    right = rows.transform_filter(f"datum.step > {middle!r}").mark_text(
        align="right", dx=-7, fontSize=11, fontWeight="bold", baseline="middle", limit=260).encode(
        x=x, y=label_y, text="crosshair_label:N", color=colour)
    return [targets, rule, dots, left, right]


def placeholder(message: str, width: int | None = None) -> AnyChart:
    """A chart-sized cell that says why a chart is missing (e.g. a run does not log the metric), so
    that the run and baseline columns stay aligned."""
    chart = alt.Chart(pd.DataFrame({"message": [message]})).mark_text(color="gray", fontSize=12).encode(
        text="message:N").properties(height=CHART_HEIGHT)
    if width is not None:
        chart.width = width
    return chart


def linked(charts: Sequence[AnyChart], columns: int = 1, renderer: str | None = None) -> dict[str, Any]:
    """The page's charts as one view with the shared zoom and crosshair, ``columns`` per row (a spec
    as :func:`to_spec` makes)."""
    rows = [list(charts[start:start + columns]) for start in range(0, len(charts), max(1, columns))]
    return linked_rows(rows, renderer)


def linked_rows(rows: Sequence[Sequence[AnyChart]], renderer: str | None = None) -> dict[str, Any]:
    """Charts in rows (e.g. one row per metric, one column per run) as one view with the shared
    zoom and crosshair, each colour scale and legend its own (a spec as :func:`to_spec` makes).
    Each chart becomes a dict alone and the rows are put together as dicts: altair's concat
    charts would deep-copy every chart and gather their parameters, which these charts do not have."""
    datasets: dict[str, Any] = {}
    specs = [[_chart_dict(chart) for chart in row] for row in rows if row]
    schema = next((spec["$schema"] for row in specs for spec in row if "$schema" in spec), None)
    views = [{"hconcat": [_view(spec, datasets, None) for spec in row]} if len(row) > 1
             else _view(row[0], datasets, None) for row in specs]
    combined: dict[str, Any] = {"vconcat": views} if len(views) > 1 else views[0]
    if sum(len(row) for row in specs) > 1:
        combined["resolve"] = {"scale": {"color": "independent", "strokeDash": "independent"}}
    renderer = renderer or os.environ.get(RENDERER_ENV, "canvas")
    combined["usermeta"] = {"embedOptions": {"renderer": "svg" if renderer == "svg" else "canvas"}}
    if schema is not None:
        combined["$schema"] = schema
    if datasets:
        combined["datasets"] = datasets
    return _finish(combined)


def to_spec(chart: AnyChart) -> dict[str, Any]:
    """The page's view as a Vega-Lite dict with the shared zoom and crosshair declared at the top.

    Marked layers are numbered (``zoom_0``...); built without altair's schema validation, data inlined
    (why: docs/app-notes.md#apps-views-interactive).
    """
    return _finish(_chart_dict(chart))


def _chart_dict(chart: AnyChart) -> dict[str, Any]:
    """``chart`` as altair's dict (no validation), its frames as Arrow datasets (:func:`_named_arrow`)."""
    datasets: dict[str, bytes] = {}
    token = _NAMED.set(datasets)
    try:
        with alt.data_transformers.enable("gdro_arrow"), alt.theme.enable("none"):
            spec = chart.to_dict(validate=False)
    finally:
        _NAMED.reset(token)
    if datasets:
        spec["datasets"] = {**spec.get("datasets", {}), **datasets}
    return spec


def _finish(spec: dict[str, Any]) -> dict[str, Any]:
    """The marked layers of ``spec`` numbered and their parameters declared at the top; lean."""
    zooms: dict[str, list[str]] = {}
    views: dict[str, list[str]] = {"hover": [], "legend": [], "line": []}
    counter = [0]

    def walk(part: Any) -> None:
        if isinstance(part, dict):
            marked = str(part.get("description", ""))
            if marked.startswith(MARKER):
                del part["description"]
                kinds = marked[len(MARKER):].split("|")
                part["name"] = f"{kinds[0].partition('@')[0]}_{counter[0]}"  # zoom_0, hover_1...
                counter[0] += 1
                for kind in kinds:
                    if kind == "zoom" or kind.startswith("zoom@"):
                        zooms.setdefault(kind.partition("@")[2], []).append(part["name"])
                    elif kind in views:
                        views[kind].append(part["name"])
            encoding = part.get("encoding")
            colour = encoding.get("color") if isinstance(encoding, dict) else None
            legend = colour.get("legend") if isinstance(colour, dict) else None
            if isinstance(legend, dict) and "labelExpr" in legend:  # a series legend (:func:`_legend`)
                legend["encoding"] = LEGEND_TOOLTIP
            for key in ("layer", "hconcat", "vconcat", "concat"):
                for child in part.get(key, []):
                    walk(child)

    walk(spec)
    groups = {group: index for index, group in enumerate(sorted(zooms))}
    zoom_views = {("" if not group else str(groups[group])): names for group, names in zooms.items()}
    params = [*spec.get("params", []), *_parameters(zoom_views, views["hover"], views["legend"], views["line"])]
    if params:
        spec["params"] = params
    return lean(spec)


#: The datasets of the chart :func:`_chart_dict` is converting in this thread (None: not converting).
_NAMED: ContextVar[dict[str, bytes] | None] = ContextVar("gdro_named_datasets", default=None)


def _named_arrow(data: Any) -> dict[str, Any]:
    """altair's data transformer while :func:`_chart_dict` converts a chart: a data frame becomes Arrow
    IPC bytes named by their content (identical frames share one dataset, as altair's names do),
    and the chart reads it by that name. altair no longer turns the frame into row dictionaries,
    hashes them as JSON and hands them back to be made Arrow again (at 50 runs, most of the time of
    Compare's spec). Field types are still inferred from the frame. Anything else, or a frame Arrow
    cannot hold as it is (mixed objects), goes to altair's rows as before."""
    found = _NAMED.get()
    if found is not None and isinstance(data, pd.DataFrame):
        try:
            payload = _arrow_bytes(pa.Table.from_pandas(data, preserve_index=False))
        except (pa.ArrowException, TypeError, ValueError):
            payload = None
        if payload is not None:
            name = f"data-{hashlib.sha256(payload).hexdigest()[:32]}"
            found[name] = payload
            return {"name": name}
    return to_values(data)


alt.data_transformers.register("gdro_arrow", _named_arrow)


def _view(spec: dict[str, Any], datasets: dict[str, Any], width: int | None) -> dict[str, Any]:
    """A top-level spec as a view of a compound spec: its datasets moved into ``datasets`` (shared),
    ``width`` pixels wide when given. The spec itself is not modified."""
    view = {key: value for key, value in spec.items() if key not in ("$schema", "datasets", "config")}
    datasets.update(spec.get("datasets", {}))
    if width is not None:
        view["width"] = width
    return view


def stack(specs: Sequence[dict[str, Any]], width: int | None = None) -> dict[str, Any]:
    """Top-level specs (from :func:`to_spec`) stacked vertically in one spec: their datasets merged,
    each colour scale and legend kept on its own, each view ``width`` pixels wide."""
    datasets: dict[str, Any] = {}
    views = [_view(spec, datasets, width) for spec in specs]
    stacked = {"vconcat": views, "datasets": datasets,
               "resolve": {"scale": {"color": "independent", "x": "independent"}}}
    return lean(stacked)


HEATMAP_ZOOM = "stepzoom"


def heatmap_grid(columns: Sequence[Sequence[dict[str, Any]]], width: int | None = None) -> dict[str, Any]:
    """Heatmap specs (from :func:`to_spec`), one column per run, stacked in one spec: datasets
    merged, every colour scale and legend on its own, and one step zoom for every heatmap (drag
    or wheel on any of them; double-click resets). The cached specs are not modified."""
    datasets: dict[str, Any] = {}
    stacks: list[dict[str, Any]] = []
    zoomed: list[str] = []
    for specs in columns:
        views = []
        for spec in specs:
            view = _view(spec, datasets, width)
            if view.get("layer"):
                name = f"{HEATMAP_ZOOM}_{len(zoomed)}"
                view["layer"] = [dict(view["layer"][0], name=name), *view["layer"][1:]]
                zoomed.append(name)
            views.append(view)
        stacks.append({"vconcat": views, "resolve": {"scale": {"color": "independent", "x": "independent"}}})
    grid: dict[str, Any] = ({"hconcat": stacks} if len(stacks) > 1 else stacks[0]) | {"datasets": datasets}
    grid["resolve"] = {"scale": {"color": "independent", "x": "independent"}}
    if zoomed:
        grid["params"] = [{"name": HEATMAP_ZOOM, "select": {"type": "interval", "encodings": ["x"]}, "bind": "scales",
                           "views": zoomed}]
    return lean(grid)


def lean(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with its inline datasets as Arrow IPC bytes and no ARIA descriptions on marks
    (why: docs/app-notes.md#apps-views-interactive).
    """
    datasets = spec.get("datasets")
    if isinstance(datasets, dict):
        spec["datasets"] = {name: _arrow_bytes(rows) if isinstance(rows, list) and rows else rows
                            for name, rows in datasets.items()}
    config = spec.setdefault("config", {})
    config["mark"] = {**config.get("mark", {}), "aria": False}
    return spec


def _arrow_bytes(rows: list[dict[str, Any]] | pa.Table) -> bytes:
    """Records (or a table) as one Arrow IPC stream (what Streamlit's frontend reads), each text column
    dictionary-encoded: a run's name is sent once, not once per point (50 runs: 0.7 MB a chart -> 0.1 MB)."""
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(rows)
    table = pa.table([pc.dictionary_encode(column.cast(pa.string()))
                      if pa.types.is_string(column.type) or pa.types.is_large_string(column.type) else column
                      for column in table.columns], names=table.column_names)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())
