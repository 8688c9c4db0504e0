"""The LM study by value, against references worked out by hand: the calibration sweep spans the study's lr in
half-decades, the warm start draws its problems from the pool's mixture (group weight x level weight), and
the report's rollout staircase is drawn for a study that ran only one of Rollout-GDRO and joint. Each was a
sampled mutant no test read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gdro_lab import RunWriter
from real_runs.lmstudy import calibration_data, learning_study, report_figures, tasks


def test_the_calibration_sweep_spans_the_studys_lr_in_half_decades() -> None:
    lrs = calibration_data.SWEEP_LRS
    assert learning_study.StudyConfig().lr in lrs
    steps = np.diff(np.log10(lrs))
    assert np.all(np.abs(steps - 0.5) < 0.03)            # x3 or x3.33: half a decade each
    assert min(lrs) == pytest.approx(1e-5) and max(lrs) == pytest.approx(3e-4)


def test_the_warm_starts_problems_follow_the_pools_mixture() -> None:
    draws = 20_000
    problems = tasks.sample_supervised(np.random.default_rng(0), draws, set())
    total = sum(tasks.GROUP_WEIGHTS[g] * spec.weight for g, levels in tasks.SKILLS.items() for spec in levels)
    for group, levels in tasks.SKILLS.items():
        for level, spec in enumerate(levels):
            expected = tasks.GROUP_WEIGHTS[group] * spec.weight / total
            seen = sum(1 for p in problems if p.group == group and tasks.cell(p) == level) / draws
            sigma = (expected * (1 - expected) / draws) ** 0.5
            assert abs(seen - expected) < 5 * sigma + 1e-9, (group, level, seen, expected)


def _run_with_rollouts(path: Path, rollouts_step_bin: np.ndarray) -> Path:
    writer = RunWriter(path, {"method": "rollout_gdro"}, rollouts_step_bin.shape[1], "test")
    for step, row in enumerate(rollouts_step_bin, start=1):
        writer.log_step(step, {"mean_success": 0.5}, {"rollouts": row})
    writer.close()
    return path


@pytest.mark.parametrize("method", ["rollout_gdro", "joint"])
def test_the_staircase_is_drawn_for_a_study_with_only_one_rollout_method(tmp_path: Path, method: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    seed0 = np.array([[2.0, 4.0, 6.0], [4.0, 4.0, 8.0]])
    seed1 = np.array([[4.0, 6.0, 4.0], [2.0, 2.0, 6.0]])
    runs = {method: {0: _run_with_rollouts(tmp_path / "s0", seed0), 1: _run_with_rollouts(tmp_path / "s1", seed1)}}
    drawn = []
    monkeypatch.setattr(report_figures, "save_figure", lambda fig, path: drawn.append(fig) or Path(path).name)
    assert report_figures.figure_staircase(runs, tmp_path / "staircase.png") == "staircase.png"
    [figure] = drawn
    stairs = figure.axes[0].lines[0].get_ydata()
    by_hand = [np.mean([seed0[s][b] for s in range(2)] + [seed1[s][b] for s in range(2)]) for b in range(3)]
    np.testing.assert_allclose(stairs, by_hand)          # 3, 4, 6: the mean over seeds and steps, per bin
