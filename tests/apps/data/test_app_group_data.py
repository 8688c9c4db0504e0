"""apps.data.group_views: a group of seeds as one run, aligned on step and bin, checked against loops."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from apps.data import curriculum, group_views
from gdro_lab.runformat.runlog import RunData


def _run(name: str, steps: list[int], share_TG: list[list[float]], gap: list[float]) -> RunData:
    return RunData(path=Path(name), meta={"num_bins": len(share_TG[0]), "status": "finished"}, config={"seed": 0},
                   steps=np.array(steps), scalars={"lead_lag_gap": np.array(gap, dtype=float)},
                   bins={"share": np.array(share_TG, dtype=float)})


#: Three seeds: the third stops after step 1 (still running), the second has a missing value.
RUNS = {"a": _run("a", [0, 1, 2], [[0.2, 0.8], [0.4, 0.6], [0.5, 0.5]], [1.0, 2.0, 3.0]),
        "b": _run("b", [0, 1, 2], [[0.3, 0.7], [math.nan, 1.0], [0.1, 0.9]], [2.0, 4.0, 9.0]),
        "c": _run("c", [0, 1], [[0.7, 0.3], [0.9, 0.1]], [6.0, 0.0])}


def _expected(statistic: str, step: int, bin_index: int) -> tuple[float, int]:
    """The statistic over the seeds logging ``step`` (missing values skipped), by a plain loop."""
    values, seeds = [], 0
    for run in RUNS.values():
        rows = list(run.steps)
        if step in rows:
            seeds += 1
            value = float(run.bins["share"][rows.index(step), bin_index])
            if not math.isnan(value):
                values.append(value)
    summary = statistics.fmean if statistic == "mean" else statistics.median
    return summary(values), seeds


@pytest.mark.parametrize("statistic", group_views.STATISTICS)
def test_group_bins_take_each_cell_over_the_seeds_that_log_its_step(statistic: str) -> None:
    frame = group_views.group_bins(RUNS, "share", statistic)
    assert sorted(zip(frame["step"], frame["bin"])) == [(step, b) for step in (0, 1, 2) for b in (0, 1)]
    for row in frame.itertuples():
        value, seeds = _expected(statistic, int(row.step), int(row.bin))
        assert row.value == pytest.approx(value), (row.step, row.bin)
        assert row.n == seeds, "n counts the seeds that log the step, not only the finite values"


def test_group_run_holds_the_mean_curriculum_and_n() -> None:
    group = group_views.group_run(RUNS, "mean", name="g")
    assert list(group.steps) == [0, 1, 2], "runs of different lengths: every step any seed logs"
    assert list(group.scalars[group_views.SEEDS_SCALAR]) == [3, 3, 2]
    expected_TG = np.array([[_expected("mean", step, b)[0] for b in (0, 1)] for step in (0, 1, 2)])
    np.testing.assert_allclose(group.bins["share"], expected_TG)
    np.testing.assert_allclose(group.scalars["lead_lag_gap"], [3.0, 2.0, 6.0])
    heatmap = curriculum.heatmap_frame(group, "share")
    np.testing.assert_allclose(heatmap["value"].to_numpy(), expected_TG.reshape(-1))


def test_median_differs_from_mean_and_follows_its_own_loop() -> None:
    median = group_views.group_run(RUNS, "median")
    np.testing.assert_allclose(median.scalars["lead_lag_gap"], [2.0, 2.0, 6.0])
    assert group_views.group_run(RUNS, "mean").scalars["lead_lag_gap"][0] != median.scalars["lead_lag_gap"][0]


def test_coverage_note_says_where_fewer_seeds_log() -> None:
    assert group_views.coverage_note(RUNS) == "3 seeds at steps 0–1; 2 seeds at step 2"


def test_across_seeds_refuses_an_unknown_statistic_and_keeps_empty_frames_empty() -> None:
    with pytest.raises(ValueError, match="mean"):
        group_views.across_seeds({"a": pd.DataFrame({"step": [0], "value": [1.0]})}, ("step",), "mode")
    empty = group_views.across_seeds({"a": pd.DataFrame(columns=["step", "value"])}, ("step",))
    assert empty.empty and list(empty.columns) == ["step", "value", "n"]
