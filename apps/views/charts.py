"""Altair chart builders for the app: frames from :mod:`apps.data` in, charts out (no Streamlit).

Heatmaps are ``mark_rect`` cells over steps x bins with bin 0 (the hardest) at the bottom, as
in the paper's Fig. 3/7; scalars are line charts; per-bin comparisons are grouped bars. Axes
show bin indices (they always fit); tooltips show the run's bin labels (e.g. ``accbin_3``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence, Union

import altair as alt
import pandas as pd

#: What the builders return (``.properties`` on a layer is typed as either).
AnyChart = Union[alt.Chart, alt.LayerChart, alt.FacetChart, alt.HConcatChart, alt.VConcatChart]

CHART_HEIGHT = 300
BIN_AXIS_TITLE = "bin (0 = hardest)"
#: Colour schemes per field: sequential for shares/weights/budgets, diverging for rewards.
SCHEMES = {"share": "viridis", "weight": "plasma", "reward": "redblue", "success": "redyellowgreen",
           "rollouts": "inferno", "multiplier": "plasma"}
#: Categorical colours for series and runs (distinct hues, unlike the theme's blues).
CATEGORY_SCHEME = "tableau10"
#: Fixed colour domains where the field has a natural range (keeps runs comparable side by side).
DOMAINS: dict[str, list[float]] = {"reward": [-1.0, 1.0], "success": [0.0, 1.0]}
NULL_COLOUR = "#d9d9d9"
NULL_NOTE = "null: no prompt assigned to any bin yet"


def _scale(scheme: str, domain: list[float] | None = None) -> alt.Scale:
    """A colour scale by scheme name (and a fixed domain when given)."""
    options: dict[str, Any] = {"scheme": scheme}
    if domain is not None:
        options["domain"] = domain
    return alt.Scale(**options)


def _step_domain(frame: pd.DataFrame) -> list[float]:
    """The whole logged step range, so that empty cells at the start or end do not shrink the axis."""
    if frame.empty:
        return [0.0, 1.0]
    return [float(frame["step"].min()), float(frame["step_end"].max())]


#: Width of a heatmap's colour legend, under its plot (which keeps the column's width): the colour
#: bar, and its title ("weight · auto 0.0952–0.106", about 130 px) cut beyond it.
HEATMAP_LEGEND_PX = 180


def heatmap(frame: pd.DataFrame, field: str, title: str, selected_step: float | None = None,
            domain: Sequence[float] | None = None, num_bins: int | None = None,
            legend_title: str | None = None) -> AnyChart:
    """Steps x bins heatmap of a long frame (step, step_end, bin, label, value); optional step rule.

    Bin 0 at the bottom; null cells light grey, named in the tooltip. ``domain`` fixes the colour scale
    (to share it between run and baseline).
    """
    fixed = list(domain) if domain is not None else DOMAINS.get(field)
    scale = _scale(SCHEMES.get(field, "viridis"), fixed)
    bins = list(range(num_bins)) if num_bins is not None else sorted(int(b) for b in frame["bin"].unique())
    x = alt.X("step:Q", title="step", scale=alt.Scale(domain=_step_domain(frame), nice=False, zero=False))
    y = alt.Y("bin:O", title=BIN_AXIS_TITLE, sort="descending", scale=alt.Scale(domain=bins[::-1]),
              axis=alt.Axis(values=bins, labelOverlap=False, labelFontSize=10 if len(bins) <= 24 else 7))
    # Null cells and valued cells are separate datasets, so that the browser does not test every
    # cell twice (Vega-Lite still adds its one validity filter), and the valued layer's
    # tooltip reads plain fields (no formatting expression per cell; the value text is made here).
    valued = frame[frame["value"].notna()]
    valued = valued.assign(text=[f"{value:.3f}" for value in valued["value"]])
    cells = alt.Chart(valued).mark_rect(clip=True).encode(
        x=x, x2="step_end:Q", y=y,
        color=alt.Color("value:Q", title=legend_title or field, scale=scale,
                        legend=alt.Legend(format=".4~g", labelLimit=0, titleLimit=HEATMAP_LEGEND_PX, orient="bottom",
                                          direction="horizontal", gradientLength=HEATMAP_LEGEND_PX)),
        tooltip=[alt.Tooltip("step:N"), alt.Tooltip("label:N", title="bin"), alt.Tooltip("text:N", title=field)],
    )
    layers: list[alt.Chart] = [cells]
    if frame["value"].isna().any():
        layers.append(alt.Chart(frame[frame["value"].isna()]).transform_filter("!isValid(datum.value)").mark_rect(
            color=NULL_COLOUR, clip=True).encode(
            x=x, x2="step_end:Q", y=y,
            tooltip=[alt.Tooltip("step:N"), alt.Tooltip("label:N", title="bin"),
                     alt.Tooltip("note:N", title=field)]).transform_calculate(note=f"'{NULL_NOTE}'"))
    if selected_step is not None:
        rule = alt.Chart(pd.DataFrame({"step": [float(selected_step)]})).mark_rule(
            color="white", strokeDash=[4, 3], strokeWidth=2, clip=True).encode(x="step:Q")
        layers.append(rule)
    return alt.layer(*layers).properties(title=title, height=CHART_HEIGHT)


def grouped_bars(frame: pd.DataFrame, group_field: str, title: str, y_title: str,
                 group_order: Sequence[str] | None = None, y_domain: Sequence[float] | None = None) -> AnyChart:
    """Bars per bin (frame: bin, label, value and ``group_field``), one coloured bar per group;
    ``y_domain`` fixes the value axis (the same for the run's and the baseline's bars)."""
    order = list(group_order) if group_order is not None else sorted(frame[group_field].astype(str).unique())
    y_scale = alt.Scale(domain=list(y_domain)) if y_domain is not None else alt.Scale()
    return alt.Chart(frame).mark_bar(clip=True).encode(
        x=alt.X("bin:O", title=BIN_AXIS_TITLE, axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset(f"{group_field}:N", sort=order),
        y=alt.Y("value:Q", title=y_title, scale=y_scale),
        color=alt.Color(f"{group_field}:N", title=None, sort=order,
                        legend=alt.Legend(orient="bottom", labelLimit=0, columns=2),
                        scale=_scale(CATEGORY_SCHEME)),
        tooltip=[alt.Tooltip("label:N", title="bin"), alt.Tooltip(f"{group_field}:N"),
                 alt.Tooltip("value:Q", format=".3f")],
    ).properties(title=title, height=CHART_HEIGHT)


def points(frame: pd.DataFrame, title: str, y_title: str, color_field: str = "metric",
           colours: Mapping[str, str] | None = None) -> AnyChart:
    """Lines with point markers, for sparse series such as evaluations (frame: step, value, color field);
    ``colours`` fixes each name's colour (the app's stable run colours)."""
    scale = _scale(CATEGORY_SCHEME)
    if colours is not None and not frame.empty:
        names = sorted(str(name) for name in frame[color_field].unique())
        scale = alt.Scale(domain=names, range=[colours.get(name, "#1f77b4") for name in names])
    return alt.Chart(frame).mark_line(point=True).encode(
        x=alt.X("step:Q", title="step"),
        y=alt.Y("value:Q", title=y_title, scale=alt.Scale(zero=False)),
        color=alt.Color(f"{color_field}:N", title=None, legend=alt.Legend(orient="bottom", labelLimit=0, columns=3),
                        scale=scale),
        tooltip=[alt.Tooltip("step:Q"), alt.Tooltip(f"{color_field}:N"), alt.Tooltip("value:Q", format=".4f")],
    ).properties(title=title, height=CHART_HEIGHT)


def sweep_lines(frame: pd.DataFrame, key: str, metric: str, colours: Mapping[str, str], log_x: bool,
                final: str = "tail mean") -> AnyChart:
    """A final metric against one swept key (frame: value_of_key, method, value, lo, hi, n): a line
    with points per method and its 95% interval as error bars (where it has one); a log x-axis for
    learning-rate scales. The title names the final value (tail mean or last value); the legend sits
    right of the plot."""
    names = list(dict.fromkeys(str(name) for name in frame["method"]))
    scale = alt.Scale(domain=names, range=[colours.get(name, "#1f77b4") for name in names])
    numeric = pd.api.types.is_numeric_dtype(frame["value_of_key"])
    x = alt.X("value_of_key:Q" if numeric else "value_of_key:O", title=key,
              scale=alt.Scale(type="log" if log_x and numeric else "linear", zero=False, nice=False)
              if numeric else alt.Undefined)
    colour = alt.Color("method:N", title=None, scale=scale, sort=names,
                       legend=alt.Legend(orient="right", labelLimit=0, symbolType="stroke", symbolStrokeWidth=3))
    tooltip = [alt.Tooltip("method:N"), alt.Tooltip("value_of_key", title=key), alt.Tooltip("value:Q", format=".4~g"),
               alt.Tooltip("lo:Q", format=".4~g"), alt.Tooltip("hi:Q", format=".4~g"), alt.Tooltip("n:Q", title="runs")]
    base = alt.Chart(frame)
    lines = base.mark_line(point=True, strokeWidth=2).encode(x=x, y=alt.Y("value:Q", title=metric,
                                                                          scale=alt.Scale(zero=False)),
                                                             color=colour, tooltip=tooltip)
    bars = base.transform_filter("isValid(datum.lo) && isValid(datum.hi)").mark_errorbar(ticks=True).encode(
        x=x, y=alt.Y("lo:Q", title=metric), y2="hi:Q", color=colour)
    return alt.layer(bars, lines).properties(title=f"{metric} ({final}) against {key}", height=CHART_HEIGHT,
                                          width=560)


#: The parallel coordinates' brush (a Vega-Lite interval selection over axes and positions), read
#: back by the Sweep page (:func:`apps.data.sweep.brush_ranges`).
BRUSH = "brush"
#: Half the length of a tick on a parallel axis, in axis widths.
TICK_HALF = 0.04
#: Opacity of a run's line outside the brush (0.5 inside it).
FADED = 0.06


def parallel_coordinates(frame: pd.DataFrame, axes: Sequence[str], colours: Mapping[str, str],
                         ticks: pd.DataFrame | None = None,
                         held: Mapping[str, tuple[float, float]] | None = None) -> AnyChart:
    """Parallel coordinates of a sweep (frame: run, method, axis, axis_index, raw, position): one
    polyline per run across the swept keys and the metric, coloured by method; each axis drawn with
    its ticks (``ticks``: axis_index, position, label); hover a line for its values.

    Methods are drawn largest first (fewest runs on top, at 0.5 opacity), so that no method hides
    another. Drag a rectangle over one axis or several (the :data:`BRUSH` interval selection) to
    brush them: the page reads the brushed ranges back. Rectangles drawn earlier (``held``: a range of
    positions per axis) are grey bands on their axes; a run outside one has ``held_out`` > 0 in
    ``frame`` and fades like a run outside the live brush."""
    names = list(dict.fromkeys(str(name) for name in frame["method"]))
    scale = alt.Scale(domain=names, range=[colours.get(name, "#1f77b4") for name in names])
    count = len(axes)
    x_scale = alt.Scale(domain=[-0.3, count - 0.45], nice=False, zero=False)
    y_scale = alt.Scale(domain=[0, 1], nice=False, padding=8)
    x = alt.X("axis_index:Q", title=None, scale=x_scale, axis=None)
    y = alt.Y("position:Q", title=None, scale=y_scale, axis=None)
    colour = alt.Color("method:N", title=None, scale=scale, sort=names,
                       legend=alt.Legend(orient="bottom", labelLimit=0, symbolType="stroke", symbolStrokeWidth=3))
    tooltip = [alt.Tooltip("run:N"), alt.Tooltip("method:N"), alt.Tooltip("axis:N"), alt.Tooltip("raw:N", title="value")]
    ends = pd.DataFrame({"axis_index": range(count), "name": list(axes), "low": 0.0, "high": 1.0})
    rules = alt.Chart(ends).mark_rule(color="#888888").encode(x=x, y=alt.Y("low:Q", scale=y_scale, axis=None),
                                                               y2="high:Q")
    titles = alt.Chart(ends).mark_text(dy=-14, fontSize=12, fontWeight="bold", color="#333333").encode(
        x=x, y=alt.Y("high:Q", scale=y_scale, axis=None), text="name:N")  # each axis named above it
    layers: list[Any] = [rules, titles]
    held = held or {}
    bands = [{"left": index - 2 * TICK_HALF, "right": index + 2 * TICK_HALF, "low": held[axis][0], "high": held[axis][1]}
             for index, axis in enumerate(axes) if axis in held]
    if bands:
        layers.append(alt.Chart(pd.DataFrame(bands)).mark_rect(color="#777777", opacity=0.2, stroke="#555555")
                      .encode(x=alt.X("left:Q", scale=x_scale, axis=None), x2="right:Q",
                              y=alt.Y("low:Q", scale=y_scale, axis=None), y2="high:Q"))
    # the brush sits on invisible points (one per run and axis), so that the lines can read it: a line
    # fades while any of its points on a brushed axis lies outside the brushed range
    layers.append(alt.Chart(frame).mark_point(opacity=0, size=20).encode(x=x, y=y).add_params(
        alt.selection_interval(name=BRUSH, encodings=["x", "y"])))
    outside = (f"isArray({BRUSH}.axis_index) && datum.axis_index >= {BRUSH}.axis_index[0] && "
               f"datum.axis_index <= {BRUSH}.axis_index[1] && (datum.position < {BRUSH}.position[0] || "
               f"datum.position > {BRUSH}.position[1]) ? 1 : 0")
    faded = "datum.out > 0 || datum.held_out > 0"  # outside the live brush or a held one
    sizes = frame.drop_duplicates("run")["method"].value_counts()
    for method in sorted(names, key=lambda name: (-int(sizes.get(name, 0)), name)):
        layers.append(alt.Chart(frame[frame["method"] == method]).transform_calculate(outside=outside)
                      .transform_joinaggregate(out="max(outside)", groupby=["run"])
                      .mark_line(strokeWidth=1.5).encode(x=x, y=y, color=colour, detail="run:N", tooltip=tooltip,
                                                         opacity=alt.condition(faded, alt.value(FADED),
                                                                               alt.value(0.5))))
    if ticks is not None and not ticks.empty:
        marks = ticks.assign(left=ticks["axis_index"] - TICK_HALF, right=ticks["axis_index"] + TICK_HALF)
        layers.append(alt.Chart(marks).mark_rule(color="#555555").encode(
            x=alt.X("left:Q", scale=x_scale, axis=None), x2="right:Q", y=y))
        layers.append(alt.Chart(marks).mark_text(align="left", dx=3, baseline="middle", fontSize=10,
                                                 color="#333333").encode(x=alt.X("right:Q", scale=x_scale, axis=None),
                                                                         y=y, text="label:N"))
    return alt.layer(*layers).properties(title="Parallel coordinates of the sweep",
                                         height=CHART_HEIGHT, width=820)
