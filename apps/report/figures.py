"""The app's figures as static PNGs, drawn with matplotlib: one function per figure, a run in, a
``Figure`` out (``gdro report``, :mod:`apps.report.cli`, writes them).

Per run the app's per-run figures; :func:`compare_figure` for several runs. The same frames as the app
(:mod:`apps.data`), so both show the same numbers. The figures: docs/app-data-notes.md#apps-report-figures.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the non-interactive backend)
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.artist import Artist  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.font_manager import FontProperties, fontManager, get_font  # noqa: E402
from matplotlib.ticker import AutoLocator, ScalarFormatter  # noqa: E402
from matplotlib.transforms import Transform, offset_copy  # noqa: E402

from apps.data import budget, curriculum, identity, realrun, results, scales, study  # noqa: E402
from apps.data.colours import MAX_STYLES, OTHERS, group_styles, rank_groups  # noqa: E402
from gdro_lab.runformat.runlog import RunData  # noqa: E402

PANEL_SIZE = (5.0, 3.4)
#: A PNG has room for one column per step of a long run (matplotlib draws them as one mesh).
REPORT_HEATMAP_COLUMNS = 2000
CMAPS = {"share": "viridis", "weight": "plasma", "reward": "RdBu", "success": "RdYlGn", "rollouts": "inferno"}


# ----------------------------------------------------------------------------- panels

@dataclass(frozen=True)
class Margins:
    """Inches kept around and between the panels of a per-run figure (a fixed layout: matplotlib's
    constrained layout lays every figure out twice before drawing it, a third of a report's time).
    ``left``: tick labels and the y label; ``top``: the figure's title and a panel's; ``bottom``:
    tick labels, the x label and a legend drawn below a panel; ``right``: a colour bar's ticks and
    label; ``across`` / ``down``: between two panels side by side / one above the other."""

    left: float = 0.95
    right: float = 0.3
    top: float = 0.7
    bottom: float = 0.6
    across: float = 0.9
    down: float = 0.9


class ReportRenderer(RendererAgg):
    """Matplotlib's Agg renderer that looks each font's line height up once per size instead of
    once per text measured (reading the font's tables: a twentieth of a report's time); the same
    pixels (the same numbers as :meth:`matplotlib.text.Text._get_layout` computes without it)."""

    _heights: dict[tuple[FontProperties, float], tuple[float | None, float | None, float | None]] = {}

    def _get_font_height_metrics(self, prop: FontProperties) -> tuple[float | None, float | None, float | None]:
        """(ascent, descent, line gap) in pixels of ``prop``'s font, from its OS/2 or hhea table
        (Nones when it has neither: matplotlib then measures "lp")."""
        key = (prop, float(self.dpi))
        found = self._heights.get(key)
        if found is None:
            font: Any = get_font(fontManager._find_fonts_by_props(prop))  # its tables as dicts
            found = (None, None, None)
            for table_name, gap_key, ascent_key, descent_key in (
                    ("OS/2", "sTypoLineGap", "sTypoAscender", "sTypoDescender"),
                    ("hhea", "lineGap", "ascent", "descent")):
                table = font.get_sfnt_table(table_name)
                if table is None:
                    continue
                scale = 1 / font.get_sfnt_table("head")["unitsPerEm"] * prop.get_size_in_points() * self.dpi / 72
                found = (table[ascent_key] * scale, -table[descent_key] * scale, table[gap_key] * scale)
                break
            self._heights[(prop.copy(), float(self.dpi))] = found
        return found


#: FreeType's hinting of the report's text: none (glyphs drawn as designed, not snapped to the pixel
#: grid): the same text a little softer, and a tenth of a report's time less than matplotlib's default.
TEXT_HINTING = "no_hinting"


class ReportCanvas(FigureCanvasAgg):
    """The Agg canvas of the report's figures, drawing with :class:`ReportRenderer` and
    :data:`TEXT_HINTING` (every draw and every PNG written, so that what a test measures is what is saved)."""

    def draw(self) -> None:
        """Draw the figure with the report's text settings."""
        with matplotlib.rc_context({"text.hinting": TEXT_HINTING}):
            super().draw()

    def print_png(self, filename_or_obj: Any, *, metadata: dict[str, str] | None = None,
                  pil_kwargs: dict[str, Any] | None = None, **_figure_options: Any) -> None:
        """Write the PNG with the report's text settings (matplotlib draws it with its own canvas's draw;
        ``savefig`` has already applied the dpi and colours it passes again, which Agg ignores)."""
        with matplotlib.rc_context({"text.hinting": TEXT_HINTING}):
            super().print_png(filename_or_obj, metadata=metadata, pil_kwargs=pil_kwargs)

    _renderer_key: tuple[int, int, float] | None = None
    #: the figure's layout when :func:`_figure` made it with fixed margins (what reuse restores)
    blank: _Blank | None = None

    def get_renderer(self) -> RendererAgg:
        """This figure's renderer at its size and dpi (a new one when either changed), as matplotlib's."""
        width, height = self.get_width_height(physical=True)
        key = (width, height, float(self.figure.dpi))
        if self._renderer_key != key:
            self.renderer = ReportRenderer(width, height, self.figure.dpi)
            self._renderer_key = key
        return self.renderer


def _figure(rows: int, columns: int, title: str, legend: Sequence[str] = (),
            margins: Margins | None = None) -> tuple[Figure, np.ndarray]:
    """Panels of :data:`PANEL_SIZE`, and room below them for a figure legend of ``legend`` entries;
    laid out by ``margins`` (a fixed layout), or by matplotlib's constrained layout without. A
    fixed-layout figure that :func:`save_png` has written is handed out again, cleared, for the next
    figure of the same layout (:class:`_Blank`)."""
    key = (rows, columns, tuple(legend), margins)
    blank = _SHELF.pop(key, None) if margins is not None else None
    if blank is not None:
        blank.clear()
        blank.figure.suptitle(title)
        return blank.figure, blank.grid()
    width = PANEL_SIZE[0] * columns
    legend_rows = -(-len(legend) // max(1, int(width // (LEGEND_ENTRY_IN + LEGEND_CHAR_IN
                                                              * max((len(label) for label in legend), default=1)))))
    height = PANEL_SIZE[1] * rows + LEGEND_ROW_IN * legend_rows
    figure = Figure(figsize=(width, height), layout="constrained" if margins is None else None)
    canvas = ReportCanvas(figure)
    # a title sits just above its panel (where matplotlib's automatic placement puts it when no tick
    # labels are on top), without measuring the y axis's tick labels again for each title
    with matplotlib.rc_context({"axes.titley": 1.0}):
        axes = figure.subplots(rows, columns, squeeze=False)
    if margins is not None:
        panel_width = (width - margins.left - margins.right - margins.across * (columns - 1)) / columns
        panel_height = (height - margins.top - margins.bottom - margins.down * (rows - 1)) / rows
        figure.subplots_adjust(left=margins.left / width, right=1 - margins.right / width,
                               top=1 - margins.top / height, bottom=margins.bottom / height,
                               wspace=margins.across / panel_width, hspace=margins.down / panel_height)
        canvas.blank = _Blank(key, figure, list(axes.flat), [axis.get_subplotspec() for axis in axes.flat])
    figure.suptitle(title)
    return figure, axes


@dataclass(eq=False)
class _Blank:
    """A fixed-layout figure as :func:`_figure` made it, to be drawn again once written: creating a
    figure's panels and their ticks is about a third of a per-run figure's time, and a report draws
    the same seven layouts for every run. :meth:`clear` takes away what a figure function added
    (lines, bars, meshes, texts, legends, colour bars, twin axes, fixed ticks, titles, labels, limits,
    an inverted or hidden axis) and puts each panel back in its place, so that the next figure's pixels
    are those of a new figure (a test draws every figure kind after others and compares)."""

    key: tuple[Any, ...]
    figure: Figure
    #: the panels in ``axes.flat`` order, as a list: a numpy object array is invisible to the garbage
    #: collector, so one here would keep every figure that is not reused alive
    panels: list[Axes]
    specs: list[Any]

    def reusable(self) -> bool:
        """Whether :meth:`clear` gives a blank figure back: not after categorical data, whose units
        (the category names) stay with the axis."""
        return all(side.get_converter() is None for axis in self.panels for side in (axis.xaxis, axis.yaxis))

    def grid(self) -> np.ndarray:
        """The panels as :func:`_figure` returns them: rows x columns."""
        grid = np.empty((self.key[0], self.key[1]), dtype=object)
        grid.flat[:] = self.panels
        return grid

    def clear(self) -> None:
        """Back to the blank panels: nothing drawn, every setting as a new figure has it."""
        panels = self.panels
        for extra in [axis for axis in self.figure.axes if not any(axis is panel for panel in panels)]:
            self.figure.delaxes(extra)  # colour bars and twin axes
        self.figure.legends.clear()
        for axis, spec in zip(panels, self.specs):
            for artist in [*axis.lines, *axis.collections, *axis.patches, *axis.texts, *axis.images]:
                artist.remove()
            axis.containers.clear()
            if axis.legend_ is not None:
                axis.legend_.remove()
            axis.set_subplotspec(spec)  # a colour bar took its room from the panel's
            axis.set_adjustable("box")  # a twin axis set "datalim"
            axis.set_axis_on()
            axis.set_title("")
            axis.set_xlabel("")
            axis.set_ylabel("")
            for side in (axis.xaxis, axis.yaxis):
                if type(side.get_major_locator()) is not AutoLocator \
                        or type(side.get_major_formatter()) is not ScalarFormatter:
                    side.reset_ticks()  # fixed ticks set their labels' rotation and size on the ticks
                    side.set_major_locator(AutoLocator())
                    side.set_major_formatter(ScalarFormatter())
                    side.isDefault_majloc = side.isDefault_majfmt = True  # as new: categorical data may set them
            axis.relim()  # no artists left: no data limits, as a new panel
            axis.set_xlim(0.0, 1.0)
            axis.set_ylim(0.0, 1.0)  # in order: an inverted axis is upright again
            axis.set_autoscale_on(True)
            axis.set_prop_cycle(None)


#: Fixed-layout figures written by :func:`save_png`, one per layout, waiting to be drawn again.
_SHELF: dict[tuple[Any, ...], _Blank] = {}


def blank_of(figure: Figure) -> _Blank | None:
    """The layout :func:`_figure` made ``figure`` with, kept on its canvas (None for any other figure).
    On the canvas, not in a table of figures: a figure that is not reused is freed once closed."""
    canvas = figure.canvas
    return canvas.blank if isinstance(canvas, ReportCanvas) else None


#: Heatmaps with their colour bars (ticks and label right of each panel) over bars with rotated bin names.
HEATMAP_MARGINS = Margins(right=0.9, across=1.5, down=1.3, bottom=1.1)


#: Characters per line of a "not logged" note (the narrowest panel holds about 45).
MISSING_WIDTH = 40


def _missing(axis: Axes, title: str, what: str) -> None:
    axis.set_title(title)
    axis.text(0.5, 0.5, "not logged:\n" + textwrap.fill(what, MISSING_WIDTH), ha="center", va="center",
              transform=axis.transAxes, color="gray")
    axis.set_axis_off()


def _heatmap(axis: Axes, run: RunData, field: str | None, title: str) -> None:
    """Steps x bins heatmap with bin 0 (hardest) at the bottom."""
    if field is None or not curriculum.has_bins(run, field):
        _missing(axis, title, field or "reward / success bins")
        return
    frame = curriculum.heatmap_frame(run, field, max_columns=REPORT_HEATMAP_COLUMNS)
    table = frame.pivot(index="bin", columns="step", values="value")
    starts = table.columns.to_numpy(dtype=float)
    ends = frame.drop_duplicates("step").set_index("step")["step_end"].reindex(table.columns).to_numpy(dtype=float)
    x_edges = np.append(starts, ends[-1])
    y_edges = np.arange(table.shape[0] + 1) - 0.5
    settings = budget.rollout_settings(run)
    # the app's default scale (auto; a constant field centred on its value): one rule for both
    domain = scales.heatmap_domain(field, run.bins[field], "auto", (settings.n_min, settings.n_max))
    low, high = domain if domain is not None else (None, None)
    mesh = axis.pcolormesh(x_edges, y_edges, np.ma.masked_invalid(table.to_numpy(dtype=float)),
                           cmap=CMAPS.get(field, "viridis"), vmin=low, vmax=high, shading="flat")
    note = f"{field} · auto {low:.3g}–{high:.3g}" if domain is not None else field
    axis.figure.colorbar(mesh, ax=axis, label=note)
    axis.set_title(f"{title} [{field}]")
    axis.set_xlabel("step")
    axis.set_ylabel("bin (0 = hardest)")
    axis.set_yticks(np.arange(table.shape[0]), [str(int(b)) for b in table.index],
                    fontsize="small" if table.shape[0] <= 20 else "xx-small")


def _lines(axis: Axes, frame: pd.DataFrame, title: str, y_label: str, what: str,
           color_field: str = "series", zero_rule: bool = False, marker: str | None = None,
           dashed: Sequence[str] = ()) -> None:
    """One line per series of a long frame (step, <color_field>, value); ``dashed`` series dashed."""
    if frame.empty:
        _missing(axis, title, what)
        return
    colours = plt.get_cmap("tab20" if frame[color_field].nunique() > 10 else "tab10")
    for position, (name, part) in enumerate(frame.groupby(color_field, sort=False)):
        axis.plot(part["step"], part["value"], label=str(name), marker=marker, linewidth=1.4,
                  color=colours(position % colours.N), linestyle="--" if name in dashed else "-",
                  zorder=3 if name in dashed else 2)
    if zero_rule:
        axis.axhline(0.0, color="gray", linewidth=0.8)
    axis.set_title(title)
    axis.set_xlabel("step")
    axis.set_ylabel(y_label)
    axis.legend(fontsize="small")


def _grouped_bars(axis: Axes, frame: pd.DataFrame, group_field: str, title: str, y_label: str,
                  order: Sequence[str]) -> None:
    """Bars per bin, one coloured bar per group in ``order``."""
    labels = frame[["bin", "label"]].drop_duplicates().sort_values("bin")
    width = 0.8 / max(len(order), 1)
    for position, group in enumerate(order):
        part = frame[frame[group_field] == group].set_index("bin").reindex(labels["bin"])
        axis.bar(labels["bin"] + (position - (len(order) - 1) / 2) * width, part["value"], width, label=group)
    axis.set_xticks(labels["bin"], labels["label"], rotation=45, ha="right", fontsize="small")
    axis.set_title(title)
    axis.set_xlabel("bin (0 = hardest)")
    axis.set_ylabel(y_label)
    axis.legend(fontsize="x-small")


# ----------------------------------------------------------------------------- one figure per view

def traveling_wave_figure(run: RunData) -> Figure:
    """Fig. 3/5: share, weight and reward heatmaps over snapshot bars with the tail average."""
    figure, axes = _figure(2, 3, f"Traveling wave: {report_name(run)}", margins=HEATMAP_MARGINS)
    fields = [("share", "Prompt share"), ("weight", "Prompt-GDRO weight"),
              (curriculum.reward_field(run), "Realized reward")]
    for column, (field, title) in enumerate(fields):
        _heatmap(axes[0, column], run, field, title)
        snapshots = curriculum.snapshot_frame(run, field) if field else pd.DataFrame()
        if snapshots.empty:
            _missing(axes[1, column], f"{title}: snapshots", field or "reward / success bins")
            continue
        order = list(snapshots.sort_values("order")["snapshot"].drop_duplicates())
        _grouped_bars(axes[1, column], snapshots, "snapshot", f"{title}: snapshots", str(field), order)
    return figure


def lead_lag_figure(run: RunData) -> Figure:
    """Eq. 32: the gap and the two mean bin indices."""
    figure, axes = _figure(1, 2, f"Lead-lag: {report_name(run)}", margins=Margins())
    frame = curriculum.lead_lag_frame(run)
    what = "share and weight bins"
    gap = curriculum.to_long(frame, {"gap": "Δμ = μ_weight − μ_data"})
    _lines(axes[0, 0], gap, "Lead-lag gap Δμ(t)", "Δμ (bins)", what, zero_rule=True)
    _lines(axes[0, 1], curriculum.to_long(frame, {"mu_weight": "μ_weight (weights)", "mu_data": "μ_data (data)"}),
           "Mean bin index", "mean bin index", what)
    return figure


def rollout_budget_figure(run: RunData, step: int | None = None) -> Figure:
    """Fig. 7-9: staircase heatmap, shadow price, frontier at a step (default: last), budget check."""
    figure, axes = _figure(2, 2, f"Rollout budget: {report_name(run)}", margins=HEATMAP_MARGINS)
    _heatmap(axes[0, 0], run, "rollouts" if curriculum.has_bins(run, "rollouts") else None, "Rollouts per prompt")
    _lines(axes[0, 1], curriculum.scalars_long(run, {"mu": "μ"}), "Shadow price μ", "μ", "mu")
    index = curriculum.step_index(run, step if step is not None else int(run.steps[-1]) if run.steps.size else 0)
    frontier = budget.frontier_frame(run, index)
    if frontier.empty:
        _missing(axes[1, 0], "Budget frontier", "rollouts and count/share bins")
    else:
        bars = frontier.melt(id_vars=["bin", "label"], value_vars=["prompt_share", "rollout_share"],
                             var_name="series", value_name="value")
        _grouped_bars(axes[1, 0], bars, "series", f"Budget frontier at step {int(run.steps[index])}", "share",
                      ["prompt_share", "rollout_share"])
    check = budget.budget_check(run)
    if check is None:
        _missing(axes[1, 1], "Mean budget", "rollouts")
    else:
        verdict = "held" if check.held else f"missed (max dev. {check.max_deviation:.3g})"
        _lines(axes[1, 1], curriculum.to_long(check.frame, {"realized": "realized mean", "target": "budget n̄"}),
               f"Mean rollouts per prompt: budget {verdict}", "rollouts per prompt", "rollouts",
               dashed=["budget n̄"])
    return figure


def se_proxy_figure(run: RunData) -> Figure:
    """Eq. 33: WSE actual vs uniform vs square-root optimum, and the reduction in percent."""
    figure, axes = _figure(1, 2, f"SE proxy: {report_name(run)}", margins=Margins())
    frame = budget.se_frame(run)
    what = "se_* scalars or share/sigma/rollouts bins"
    _lines(axes[0, 0], curriculum.to_long(frame, {"se_actual": "actual", "se_uniform": "uniform n̄",
                                            "se_sqrt": "square-root optimum"}), "Weighted SE proxy", "WSE", what,
           dashed=["uniform n̄"])
    mean = budget.mean_reduction(frame)
    _lines(axes[0, 1], curriculum.to_long(frame, {"se_reduction_pct": "actual vs uniform",
                                            "se_sqrt_reduction_pct": "optimum vs uniform"}),
           f"Reduction (mean {mean:.1f}%)" if np.isfinite(mean) else "Reduction", "reduction (%)", what,
           zero_rule=True)
    return figure


def eval_panels(evals: pd.DataFrame) -> list[tuple[str, list[str]]]:
    """Evaluation metrics split by scale: (panel title, metric names) for rates in [0, 1] by name
    (accuracies, mean@k; pass@k separately), then one panel per other metric: counts such as
    ``rollouts_total``, ``reward/timeouts`` or ``errors`` (which would flatten every rate, or pass
    for a rate when they stay at 0 or 1) and anything else. ``_lo``/``_hi`` bounds are drawn as
    bands with their metric, not as metrics."""
    if evals.empty:
        return []
    names = results.headline_metrics(dict.fromkeys(evals["metric"]))
    values = {name: evals.loc[evals["metric"] == name, "value"].to_numpy(dtype=float) for name in names}
    rates = [name for name in names if scales.metric_kind(name, values[name]) == "rate"]
    passes = [name for name in rates if "pass@" in name]
    others = [name for name in rates if name not in passes]
    panels = [(title, group) for title, group in (("Evaluation: rates", others), ("Evaluation: pass@k", passes))
              if group]
    return panels + [(f"Evaluation: {name}", [name]) for name in names if name not in rates]


def _legend_below(axis: Axes, entries: int) -> None:
    """The axis' legend under the panel (below its tick labels and x label), never over them."""
    axis.legend(fontsize="x-small", loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=_below(axis),
                frameon=False, ncol=max(1, min(3, entries)))


#: Inches from a panel's lower edge to the top of a legend drawn below it (under its tick labels and x label).
LEGEND_BELOW_IN = 0.5


def _below(axis: Axes) -> Transform:
    """The panel's axes coordinates moved :data:`LEGEND_BELOW_IN` inches down, whatever the panel's height."""
    figure = axis.get_figure(root=True)
    assert isinstance(figure, Figure)
    return offset_copy(axis.transAxes, fig=figure, y=-LEGEND_BELOW_IN, units="inches")


def _below_margins(panels: Sequence[tuple[str, list[str]]]) -> Margins:
    """Margins of a figure whose panels may have a legend below (:func:`_legend_below`: 3 entries a
    row, wider than the panel with long names): room for the most rows of any of them, and on the
    right for a legend wider than its panel."""
    rows = max((-(-len(names) // 3) for _, names in panels), default=0)
    below = LEGEND_BELOW_IN - 0.35 + LEGEND_ROW_IN * rows if rows else 0.0
    wide = any(len(names) >= 3 for _, names in panels)
    return Margins(bottom=Margins.bottom + below, down=Margins.down + below,
                   right=1.0 if wide else Margins.right, across=1.3 if wide else Margins.across)


def _eval_panel(axis: Axes, evals: pd.DataFrame, title: str, names: list[str]) -> None:
    """Eval metrics over steps with distinct colours, and shaded ``_lo``–``_hi`` bands when logged."""
    colours = plt.get_cmap("tab20" if len(names) > 10 else "tab10")
    for position, name in enumerate(names):
        part = evals[evals["metric"] == name].sort_values("step")
        colour = colours(position % colours.N)
        axis.plot(part["step"], part["value"], marker="o", markersize=3, linewidth=1.4, color=colour, label=name)
        lo = evals[evals["metric"] == f"{name}_lo"].set_index("step")["value"]
        hi = evals[evals["metric"] == f"{name}_hi"].set_index("step")["value"]
        if not lo.empty and not hi.empty:
            steps = sorted(set(lo.index) & set(hi.index))
            axis.fill_between(steps, lo.reindex(steps), hi.reindex(steps), color=colour, alpha=0.2, linewidth=0)
    axis.set_title(title)
    axis.set_xlabel("step")
    axis.set_ylabel(names[0] if len(names) == 1 else "rate")
    _legend_below(axis, len(names))


def outcomes_figure(run: RunData, max_panels: int = 9) -> Figure:
    """Mean and worst-group success, effective support, and evaluation metrics, one panel per scale."""
    evals = results.evals_frame(run)
    panels = eval_panels(evals)[:max_panels]
    columns = 3
    rows = 1 + -(-max(len(panels) - 1, 0) // columns)
    figure, axes = _figure(rows, columns, f"Outcomes: {report_name(run)}", margins=_below_margins(panels))
    frame = results.outcomes_frame(run)
    _lines(axes[0, 0], curriculum.to_long(frame, {"mean_success": "mean", "worst_bin_success": "worst bin"}),
           "Training success", "success rate", "mean_success / success bins")
    _lines(axes[0, 1], curriculum.to_long(frame, {"effective_support": "exp(entropy)"}),
           f"Effective support (of {run.num_bins} bins)", "bins", "weight bins")
    slots = [axes[0, 2], *axes[1:].flat]
    if not panels:
        _missing(slots[0], "Evaluations", "eval.jsonl")
    for axis, (title, names) in zip(slots, panels):
        _eval_panel(axis, evals, title, names)
    for axis in slots[max(len(panels), 1):]:
        axis.set_axis_off()
    return figure


def evaluations_figure(run: RunData) -> Figure:
    """Per-benchmark evaluations with their 95% intervals (the app's Evaluations page): one panel per
    metric (mean@k, pass@k) with a line per benchmark and summary and its band, then the latest
    evaluation as intervals (error bars) per benchmark and summary."""
    frame = realrun.eval_metrics(run)
    metrics = sorted(frame["metric"].unique(), key=lambda name: (name.split("@")[0] != "mean", name)) \
        if not frame.empty else []
    figure, axes = _figure(1, max(1, len(metrics)) + 1, f"Evaluations with 95% intervals: {report_name(run)}",
                           margins=Margins(across=1.6, bottom=1.1))
    what = "agreed eval names ({bench}/mean@k, pooled/..., worst_group/...)"
    if not metrics:
        _missing(axes[0, 0], "Evaluations", what)
        _missing(axes[0, 1], "Latest evaluation", what)
        return figure
    for axis, metric in zip(axes[0], metrics):
        series = realrun.eval_series(frame, metric)
        colours = plt.get_cmap("tab10")
        for position, (name, part) in enumerate(series.groupby("series", sort=False)):
            colour = colours(position % colours.N)
            axis.plot(part["step"], part["value"], marker="o", markersize=3, color=colour, label=str(name))
            if part["lo"].notna().any():
                axis.fill_between(part["step"], part["lo"], part["hi"], color=colour, alpha=0.18, linewidth=0)
        axis.set_title(f"{metric} per benchmark (95% interval)")
        axis.set_xlabel("step")
        axis.set_ylabel(metric)
        axis.set_ylim(*_rate_limits(series))
        _legend_below(axis, series["series"].nunique())
    last = frame[(frame["step"] == frame["step"].max()) & (frame["kind"] != "group")]
    axis = axes[0, -1]
    labels = [f"{name} {metric}" for name, metric in zip(last["name"], last["metric"])]
    positions = np.arange(len(last))
    low = (last["value"] - last["lo"]).clip(lower=0).fillna(0).to_numpy(dtype=float)
    high = (last["hi"] - last["value"]).clip(lower=0).fillna(0).to_numpy(dtype=float)
    axis.errorbar(last["value"].to_numpy(dtype=float), positions, xerr=[low, high], fmt="o", capsize=3)
    axis.set_yticks(positions, labels, fontsize="x-small")
    axis.set_xlim(0, 1)
    axis.set_title(f"Latest evaluation (step {int(last['step'].max())})")
    axis.set_xlabel("value [95% interval]")
    return figure


def _rate_limits(frame: pd.DataFrame) -> tuple[float, float]:
    """Y-limits of a rate panel: its values and bands, at least 0.1 wide, inside [0, 1]."""
    values = frame[["value", "lo", "hi"]].to_numpy(dtype=float)
    domain = scales.y_domain(values, (0.0, 1.0))
    return domain if domain is not None else (0.0, 1.0)


def step_time_figure(run: RunData) -> Figure:
    """Where a run's time goes (the app's Step time page): seconds per step by phase, stacked; the
    total step time with tokens per second; each phase's share of the step."""
    figure, axes = _figure(1, 3, f"Step time: {report_name(run)}", margins=Margins(across=2.0, bottom=1.1))
    frame = realrun.time_frame(run)
    what = "time/* scalars (a trainer's step times)"
    if frame.empty:
        for axis, title in zip(axes[0], ("Seconds per step by phase", "Total step time", "Share of the step")):
            _missing(axis, title, what)
        return figure
    table = frame.pivot_table(index="step", columns="phase", values="seconds", aggfunc="sum", sort=False)
    phases = list(dict.fromkeys(frame["phase"]))
    table = table[phases]
    axis = axes[0, 0]
    axis.stackplot(table.index.to_numpy(dtype=float), table.to_numpy(dtype=float).T, labels=phases,
                   colors=[plt.get_cmap("tab10")(i % 10) for i in range(len(phases))])
    axis.set_title("Seconds per step by phase (stacked)")
    axis.set_xlabel("step")
    axis.set_ylabel("seconds per step")
    _legend_below(axis, len(phases))
    axis = axes[0, 1]
    if curriculum.has_scalar(run, realrun.TIME_TOTAL):
        axis.plot(run.steps, run.scalars[realrun.TIME_TOTAL], color="#1f77b4", label="time/step")
    axis.set_ylim(bottom=0)
    axis.set_title("Total step time")
    axis.set_xlabel("step")
    axis.set_ylabel("seconds")
    if curriculum.has_scalar(run, realrun.TOKENS_PER_S):
        twin = axis.twinx()
        twin.plot(run.steps, run.scalars[realrun.TOKENS_PER_S], color="#ff7f0e", label="tokens / s")
        twin.set_ylabel("tokens per second")
        twin.set_ylim(bottom=0)
        handles = axis.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
        axis.legend(handles, [str(h.get_label()) for h in handles], fontsize="x-small", loc="upper center",
                    bbox_to_anchor=(0.5, 0.0), bbox_transform=_below(axis), frameon=False, ncol=2)
    shares = realrun.time_table(run)
    axis = axes[0, 2]
    axis.barh(shares["phase"], shares["share of step (%)"], color="#1f77b4")
    axis.invert_yaxis()
    axis.set_xlim(0, 100)
    axis.set_title("Share of the step per phase")
    axis.set_xlabel("% of the summed step time")
    return figure


def compare_figure(runs: dict[str, RunData], groups: Sequence[study.Method] | None = None,
                   colours: Mapping[str, str] | None = None, top_k: int = MAX_STYLES) -> Figure:
    """Key scalars of several runs, one panel per metric: one line per run, or, for a study
    (``groups``: seeds grouped as the app groups them), one mean line per group with its 95%
    Student-t band over seeds (groups of at least 3 seeds, as in the app).

    Lines are styled as in the app (:func:`apps.data.colours.group_styles`): up to ``top_k`` (at
    most 20) runs or groups by colour and dash, the paper's methods in their colours; beyond, the
    top k by the first metric's final value and the rest as one grey "others" (no band). One legend
    for the figure, below the panels (constrained layout: never over a title, never narrowing a
    panel). ``colours`` is ignored (kept for callers of the older signature)."""
    del colours
    names = list(runs)
    frames = {name: results.compare_frame(runs, name)
              for name in (*results.COMPARE_DEFAULTS, *results.COMPARE_NEXT[:2])}
    metrics = [name for name, frame in frames.items() if not frame.empty] or ["mean_success"]
    columns = min(3, len(metrics))
    rows = -(-len(metrics) // columns)
    members = {group.label: [run for _, run in group.runs] for group in groups} if groups else \
        {name: [run] for name, run in runs.items()}
    method_of = {label: identity.method_of(members[label][0].config) for label in members}
    ranked = rank_groups(list(members), {label: _mean_final(found, metrics[0]) for label, found in members.items()}) \
        if len(members) > top_k else list(members)
    styles = group_styles(ranked, method_of, top_k)
    if groups:
        seeds = sorted({group.seeds for group in groups})
        title = (f"Study: {len(groups)} groups of {', '.join(map(str, seeds))} seeds (mean; 95% interval over "
                 f"seeds, groups of {study.MIN_BAND_SEEDS}+ seeds)")
    else:
        title = f"Compare: {len(names)} runs"
    kept = ranked[:min(top_k, MAX_STYLES)]
    labels = [*kept, *([f"{OTHERS} ({len(ranked) - len(kept)} more)"] if len(ranked) > len(kept) else [])]
    figure, axes = _figure(rows, columns, title, legend=labels)
    handles: dict[str, Artist] = {}
    for axis, metric in zip(axes.flat, metrics):
        parts = (study.band_frame(groups, metric), "method") if groups else (results.compare_frame(runs, metric), "run")
        band, field = parts
        for label in [*ranked[len(kept):], *kept]:  # "others" first: drawn under the kept lines
            part = band[band[field] == label]
            colour, dash = styles[label]
            other = label not in kept
            (line,) = axis.plot(part["step"], part["value"], color=colour, linewidth=0.9 if other else 1.4,
                                alpha=0.6 if other else 1.0, linestyle=(0, dash) if dash else "-",
                                zorder=1 if other else 2, label=label)
            handles.setdefault(labels[-1] if other else label, line)
            if not other and "lo" in part and (part["lo"].notna() & part["hi"].notna()).any():
                shown = part["lo"].notna() & part["hi"].notna()
                axis.fill_between(part["step"][shown], part["lo"][shown], part["hi"][shown], color=colour,
                                  alpha=0.18 if len(kept) < 6 else 0.1, linewidth=0)
        if metric == "lead_lag_gap":
            axis.axhline(0.0, color="gray", linewidth=0.8)
        axis.set_title(metric)
        axis.set_xlabel("step")
        axis.set_ylabel(metric)
    for axis in list(axes.flat)[len(metrics):]:
        axis.set_axis_off()
    if handles:
        figure.legend([handles[label] for label in labels if label in handles],
                      [label for label in labels if label in handles], loc="outside lower center",
                      fontsize="x-small", ncol=_legend_columns(figure, labels), frameon=False)
    return figure


def _mean_final(runs: Sequence[RunData], metric: str) -> float:
    """The mean final value of ``metric`` over ``runs`` (NaN when none logs it): what ranks groups."""
    finals = [value for value in (study.final_value(run, metric) for run in runs) if np.isfinite(value)]
    return float(np.mean(finals)) if finals else float("nan")


#: Inches a legend entry takes beside its text (the line sample and the gap), and per character (x-small).
LEGEND_ENTRY_IN, LEGEND_CHAR_IN, LEGEND_ROW_IN = 0.7, 0.065, 0.2


def _legend_columns(figure: Figure, labels: Sequence[str]) -> int:
    """Legend entries per row that fit the figure's width (the longest label sets the column width)."""
    longest = max((len(label) for label in labels), default=1)
    return max(1, min(len(labels), int(figure.get_figwidth() // (LEGEND_ENTRY_IN + LEGEND_CHAR_IN * longest))))


def report_name(run: RunData) -> str:
    """A run's name in the figures' titles: ``<method>_seed<seed>`` from its config when it
    says both (simulator runs all live in folders named ``seed0``..., trainer runs in folders
    named by their producer), ``<method>_<folder>`` without a seed, else the folder name."""
    method, seed = identity.method_of(run.config), identity.seed_of(run.config)
    if method and seed is not None:
        return f"{method}_seed{seed}"
    if method:
        return f"{method}_{run.path.name}"
    return run.path.name or str(run.path)


#: zlib's fastest level: a third of the encoding time for files about a tenth larger (the same pixels).
PNG_COMPRESS_LEVEL = 1


def save_png(figure: Figure, target: Path) -> None:
    """Write ``figure`` to ``target`` as a PNG (110 dpi) and close it: a per-run figure goes back to be
    drawn again (:class:`_Blank`; the caller must not use it after this), any other is closed
    (pyplot keeps every open figure)."""
    figure.savefig(target, dpi=110, pil_kwargs={"compress_level": PNG_COMPRESS_LEVEL})
    blank = blank_of(figure)
    if blank is not None and blank.reusable():
        _SHELF[blank.key] = blank
    else:
        plt.close(figure)
