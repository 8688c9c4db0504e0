"""gdro report's per-run figures use a fixed layout (apps.report.figures.Margins) instead of
matplotlib's constrained layout: every panel, with its tick labels, axis labels, title, colour
bar and legend, stays inside the figure, apart from every other panel and from the figure's
title, and a legend drawn below a panel stays below its x label."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

import matplotlib
import matplotlib.image
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from apps.data import loading
from apps.report import figures
from gdro_lab.runformat.runlog import RunData

FIGURES: dict[str, Callable[[RunData], Figure]] = {
    "traveling_wave": figures.traveling_wave_figure, "lead_lag": figures.lead_lag_figure,
    "rollout_budget": figures.rollout_budget_figure, "se_proxy": figures.se_proxy_figure,
    "outcomes": figures.outcomes_figure, "evaluations": figures.evaluations_figure,
    "step_time": figures.step_time_figure}


def _apart(first: Any, second: Any) -> bool:
    """Two boxes (display pixels) that do not overlap (touching edges allowed)."""
    return first.x1 <= second.x0 + 1 or second.x1 <= first.x0 + 1 or first.y1 <= second.y0 + 1 \
        or second.y1 <= first.y0 + 1


def _box(axis: Any, renderer: Any) -> Any:
    """The panel's box with everything drawn for it (ticks, labels, title, legend)."""
    box = axis.get_tightbbox(renderer)
    assert box is not None
    return box


def layout_problems(figure: Figure) -> list[str]:
    """What of the figure's layout overlaps or is cut; empty when nothing is."""
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    width, height = figure.bbox.width, figure.bbox.height
    titles = [text for text in figure.texts if figure.get_suptitle() and text.get_text() == figure.get_suptitle()]
    assert titles, "every per-run figure has a title"
    title = titles[0].get_window_extent(renderer)
    panels = [(axis.get_title() or axis.get_label() or "a panel", _box(axis, renderer),
               tuple(axis.get_position().bounds)) for axis in figure.axes if axis.axison or axis.get_title()]
    problems = []
    for index, (name, box, position) in enumerate(panels):
        if box.x0 < -1 or box.y0 < -1 or box.x1 > width + 1 or box.y1 > height + 1:
            problems.append(f"{name} is cut by the figure's edge")
        if not _apart(box, title):
            problems.append(f"{name} is under the figure's title")
        for other, other_box, other_position in panels[index + 1:]:
            if other_position != position and not _apart(box, other_box):  # a twin axis shares its panel
                problems.append(f"{name} overlaps {other}")
    for axis in figure.axes:
        legend = axis.get_legend()
        if legend is not None and axis.xaxis.label.get_text() and not _apart(
                legend.get_window_extent(renderer), axis.xaxis.label.get_window_extent(renderer)):
            problems.append(f"{axis.get_title()}: the legend covers the x label")
    return problems


@pytest.mark.parametrize("kind", ["synthetic_run", "real_run"])
def test_per_run_figures_keep_every_panel_apart(kind: str, request: pytest.FixtureRequest) -> None:
    run = loading.load_run(Path(request.getfixturevalue(kind)))
    for name, make in FIGURES.items():
        figure = make(run)
        assert figure.get_layout_engine() is None, f"{name}: a fixed layout, not a layout engine"
        assert layout_problems(figure) == [], name
        plt.close(figure)


def _pixels(figure: Figure) -> Any:
    with matplotlib.rc_context({"text.hinting": figures.TEXT_HINTING}):  # matplotlib's canvas as the report's
        figure.canvas.draw()
    return np.asarray(figure.canvas.buffer_rgba()).copy()  # type: ignore[attr-defined]


def test_report_renderer_draws_the_same_pixels_as_matplotlibs(real_run: Path) -> None:
    """The report's canvas looks a font's line height up once per size (figures.ReportRenderer): every
    text lands on the same pixels as with matplotlib's own Agg canvas, multi-line notes included."""
    run = loading.load_run(real_run)
    for name, make in FIGURES.items():
        figure = make(run)
        assert isinstance(figure.canvas, figures.ReportCanvas), name
        ours = _pixels(figure)
        FigureCanvasAgg(figure)  # the same figure on matplotlib's canvas and renderer
        assert np.array_equal(_pixels(figure), ours), f"{name}: text moved by the cached font heights"
    missing = figures.traveling_wave_figure(dataclasses.replace(run, bins={}))  # "not logged:" notes, 3 lines
    ours = _pixels(missing)
    FigureCanvasAgg(missing)
    assert np.array_equal(_pixels(missing), ours), "multi-line notes keep their line spacing"


def test_a_saved_report_png_is_what_the_report_canvas_draws(real_run: Path, tmp_path: Path) -> None:
    """save_png writes the pixels the report's canvas draws (its text settings included), so the layout
    that the tests above measure on a drawn figure is the one in the file."""
    figure = figures.outcomes_figure(loading.load_run(real_run))
    figure.set_dpi(110)  # save_png's resolution
    drawn = _pixels(figure)
    figures.save_png(figure, tmp_path / "outcomes.png")
    saved = matplotlib.image.imread(tmp_path / "outcomes.png")
    assert np.array_equal((saved * 255).round().astype(np.uint8), drawn)
