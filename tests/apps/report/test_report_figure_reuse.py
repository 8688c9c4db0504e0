"""gdro report draws each per-run figure layout once per process and reuses it for the next run
(apps.report.figures._Blank): every PNG it writes is, pixel for pixel, the PNG a new figure gives,
whatever figure of the same layout was drawn before it (runs with and without bins, a trainer run
with step times and evaluations, another method, another number of bins); and a figure that was not
written is never handed out again."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

import matplotlib.image
import numpy as np
import pytest
from gdro_app_synthetic import write_synthetic_run
from matplotlib.figure import Figure

from apps.data import loading
from apps.report import figures
from gdro_lab.runformat.runlog import RunData

FIGURES: dict[str, Callable[[RunData], Figure]] = {
    "traveling_wave": figures.traveling_wave_figure, "lead_lag": figures.lead_lag_figure,
    "rollout_budget": figures.rollout_budget_figure, "se_proxy": figures.se_proxy_figure,
    "outcomes": figures.outcomes_figure, "evaluations": figures.evaluations_figure,
    "step_time": figures.step_time_figure}


@pytest.fixture(scope="module")
def various_runs(real_run: Path, synthetic_run: Path, tmp_path_factory: pytest.TempPathFactory) -> list[RunData]:
    """Runs whose figures differ in every way a figure function branches on: a trainer run (step
    times, twin axis, evaluations with bounds), the same run with no bins logged ("not logged" panels,
    no colour bars), a run of another method with 10 bins, and a simulator-layout run of GRPO."""
    root = tmp_path_factory.mktemp("reuse")
    real = loading.load_run(real_run)
    return [real, loading.load_run(write_synthetic_run(root / "grpo10", steps=25, num_bins=10, seed=7, method="grpo")),
            dataclasses.replace(real, bins={}), loading.load_run(synthetic_run), real]


def _png(figure: Figure, target: Path) -> np.ndarray:
    figures.save_png(figure, target)
    return matplotlib.image.imread(target)


@pytest.mark.parametrize("kind", list(FIGURES))
def test_a_reused_figure_writes_the_pixels_of_a_new_one(kind: str, various_runs: list[RunData],
                                                         tmp_path: Path) -> None:
    make = FIGURES[kind]
    figures._SHELF.clear()
    reused: list[np.ndarray] = []
    handed: list[Figure] = []
    for index, run in enumerate(various_runs):  # one after the other, as a worker of gdro report draws
        figure = make(run)
        handed.append(figure)
        reused.append(_png(figure, tmp_path / f"reused-{index}.png"))
    again = sum(any(figure is earlier for earlier in handed[:index]) for index, figure in enumerate(handed))
    assert again >= 2, f"{kind}: {again} figures drawn again (the test would prove nothing)"
    for index, run in enumerate(various_runs):
        figures._SHELF.clear()  # a new figure
        fresh = _png(make(run), tmp_path / f"fresh-{index}.png")
        assert fresh.shape == reused[index].shape, f"{kind}, run {index}: size"
        different = np.argwhere(np.any(fresh != reused[index], axis=-1))
        assert different.size == 0, (f"{kind}, run {index}: {len(different)} pixels differ from a new figure's, "
                                     f"first at (row, column) {tuple(different[0])}")
    figures._SHELF.clear()


def test_a_figure_not_yet_written_is_never_handed_out_again(real_run: Path, tmp_path: Path) -> None:
    run = loading.load_run(real_run)
    figures._SHELF.clear()
    first = figures.lead_lag_figure(run)
    second = figures.lead_lag_figure(run)
    assert second is not first, "a figure still being drawn was handed out for another"
    figures.save_png(first, tmp_path / "first.png")
    assert figures.lead_lag_figure(run) is first, "a written figure is drawn again"
    assert figures.lead_lag_figure(run) is not second, "second was never written: it is not reused"
    figures._SHELF.clear()


def _scribble(figure: Figure, axes: np.ndarray) -> None:
    """Everything a figure function may do to a fixed-layout figure's panels (and more)."""
    first, second = axes[0, 0], axes[0, 1]
    first.plot([0, 5], [3, 9], label="a line")
    first.fill_between([0, 5], [2, 8], [4, 10], alpha=0.2)
    first.bar([1, 2], [3, 4])
    first.errorbar([1], [2], xerr=[[0.5], [0.5]], fmt="o")
    first.set_xticks([1, 2], ["one", "two"], rotation=45, ha="right", fontsize="small")
    first.invert_yaxis()
    first.set_xlim(-3, 3)
    first.set_title("a title")
    first.set_xlabel("x")
    first.set_ylabel("y")
    first.legend()
    mesh = second.pcolormesh(np.arange(4), np.arange(3), np.ones((2, 3)))
    figure.colorbar(mesh, ax=second, label="a colour bar")
    twin = second.twinx()
    twin.plot([0, 1], [5, 6])
    second.text(0.5, 0.5, "a note", transform=second.transAxes)
    second.set_ylim(bottom=0)
    second.set_axis_off()
    figure.legend(["a figure legend"])


def _state(axis: object) -> tuple[object, ...]:
    """What of a panel a figure function reads or sets, beside the pixels."""
    from matplotlib.axes import Axes
    assert isinstance(axis, Axes)
    return (axis.get_title(), axis.get_xlabel(), axis.get_ylabel(), axis.get_xlim(), axis.get_ylim(),
            axis.get_autoscalex_on(), axis.get_autoscaley_on(), axis.get_adjustable(), axis.axison,
            axis.xaxis_inverted(), axis.yaxis_inverted(), len(axis.get_children()),
            *[(type(side.get_major_locator()).__name__, type(side.get_major_formatter()).__name__,
               side.isDefault_majloc, side.isDefault_majfmt) for side in (axis.xaxis, axis.yaxis)],
            tuple(axis.get_position().bounds))


def _drawn(figure: Figure) -> np.ndarray:
    figure.canvas.draw()
    return np.asarray(figure.canvas.buffer_rgba()).copy()  # type: ignore[attr-defined]


@pytest.mark.parametrize("then", ["nothing", "a line", "categorical bars"])
def test_clearing_a_figure_undoes_everything_a_figure_function_may_do(then: str) -> None:
    """_Blank.clear after every kind of drawing gives the state and the pixels of a new figure, both
    blank and with something drawn on it afterwards (categorical data too: it needs the default ticks)."""
    layout = dict(rows=1, columns=2, title="t", margins=figures.Margins(right=0.9))
    figures._SHELF.clear()
    used, axes = figures._figure(**layout)  # type: ignore[arg-type]
    _scribble(used, axes)
    blank = figures.blank_of(used)
    assert blank is not None
    blank.clear()
    new, new_axes = figures._figure(**layout)  # type: ignore[arg-type]
    assert new is not used
    for figure, panels in ((used, axes), (new, new_axes)):
        if then == "a line":
            panels[0, 0].plot([0, 2], [1, 5])
        elif then == "categorical bars":
            panels[0, 1].barh(["p", "q"], [1, 2])
    assert [_state(axis) for axis in used.axes] == [_state(axis) for axis in new.axes]
    assert len(used.legends) == len(new.legends) == 0
    assert np.array_equal(_drawn(used), _drawn(new))
    figures._SHELF.clear()


def test_a_written_figure_that_is_not_reused_is_freed(real_run: Path, tmp_path: Path) -> None:
    """The step-time figure of a trainer run holds categorical shares, so it is not reused: once
    written it must be freed like any closed figure (a report over 1,000 runs would otherwise keep
    every one of them), while a reusable one stays on the shelf."""
    import gc
    import weakref

    run = loading.load_run(real_run)
    figures._SHELF.clear()
    step_time = figures.step_time_figure(run)
    assert figures.blank_of(step_time) is not None
    freed = weakref.ref(step_time)
    figures.save_png(step_time, tmp_path / "step_time.png")
    del step_time
    gc.collect()
    assert freed() is None, "a written figure that is not reused stays in memory"
    outcomes = figures.outcomes_figure(run)
    kept = weakref.ref(outcomes)
    figures.save_png(outcomes, tmp_path / "outcomes.png")
    del outcomes
    gc.collect()
    assert kept() is not None and figures.outcomes_figure(run) is kept(), "a reusable one waits on the shelf"
    figures._SHELF.clear()
