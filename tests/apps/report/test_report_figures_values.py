"""gdro report's per-run figures by what they show, for runs written by hand: a heatmap for each field the run
logged and a "not logged" note (no heatmap) for one it did not; the outcomes figure has as many panel rows as
its panels need (two training panels and the first evaluation panel in the first row, three per row after);
the evaluations figure draws a panel per logged metric and its "not logged" notes only for a run without
agreed eval names. Each was a sampled mutant no test read (the figures' test file was left out of the
sample as too slow)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.collections import QuadMesh

from apps.report import figures
from gdro_lab import RunWriter
from gdro_lab.runformat.runlog import RunData, read_run


@pytest.fixture(autouse=True)
def _close_figures() -> Any:
    yield
    plt.close("all")


def _run(path: Path, evals: dict[str, float], bins: tuple[str, ...] = ("share", "reward")) -> RunData:
    writer = RunWriter(path, {"method": "grpo", "n_min": 2, "n_max": 8, "n_bar": 4}, 3, "test")
    for step in range(1, 7):
        writer.log_step(step, {"mean_success": 0.1 * step}, {name: np.full(3, 0.3) for name in bins})
        if step % 3 == 0 and evals:
            writer.log_eval(step, {name: value * step / 6 for name, value in evals.items()})
    writer.close()
    return read_run(path)


def _notes(axis: Any) -> list[str]:
    return [text.get_text() for text in axis.texts if text.get_text().startswith("not logged")]


def _panel(figure: Any, title: str) -> Any:
    return next(axis for axis in figure.axes if axis.get_title().startswith(title))


def test_a_field_the_run_did_not_log_gets_a_note_and_no_heatmap(tmp_path: Path) -> None:
    figure = figures.traveling_wave_figure(_run(tmp_path / "run", {}, bins=("share", "reward")))
    for logged in ("Prompt share [", "Realized reward ["):
        axis = _panel(figure, logged)
        assert any(isinstance(c, QuadMesh) for c in axis.collections) and not _notes(axis)
    weight = _panel(figure, "Prompt-GDRO weight")
    assert not any(isinstance(c, QuadMesh) for c in weight.collections)
    assert _notes(weight) == ["not logged:\nweight"]


METRICS = ("accuracy", "pass@8", "errors", "rollouts_total", "seconds")   # one panel each (rates, pass@k, counts)


@pytest.mark.parametrize("panels", [0, 1, 2, 4, 5])
def test_the_outcomes_figure_has_the_rows_its_panels_need(tmp_path: Path, panels: int) -> None:
    figure = figures.outcomes_figure(_run(tmp_path / "run", {name: 0.5 for name in METRICS[:panels]}))
    rows, free = 1, 1                       # the first row: two training panels, one slot for an evaluation
    for _ in range(panels):
        if free == 0:
            rows, free = rows + 1, 3
        free -= 1
    assert len({round(axis.get_position().y0, 3) for axis in figure.axes}) == rows
    assert len(figure.axes) == 3 * rows


def test_the_evaluations_figure_notes_missing_metrics_only_when_they_are_missing(tmp_path: Path) -> None:
    logged = figures.evaluations_figure(_run(tmp_path / "a", {"gsm8k/mean@8": 0.5, "gsm8k/pass@8": 0.7,
                                                              "pooled/mean@8": 0.5}))
    assert not any(_notes(axis) for axis in logged.axes)
    titles = [axis.get_title() for axis in logged.axes]
    assert any(t.startswith("mean@8 per benchmark") for t in titles) and any(t.startswith("pass@8") for t in titles)
    missing = figures.evaluations_figure(_run(tmp_path / "b", {"accuracy": 0.5}))
    assert [len(_notes(axis)) for axis in missing.axes] == [1, 1]
