"""``gdro predict`` by value, against numbers worked out by hand: the prediction's short runs log every step,
GRPO's learning-rate grid is extended at most four sqrt(2) steps past its x0.5..x2 start (``run_all``'s
docstring), and the compute-scaling sigmoid is read at the planned run's steps x batch x n̄ rollouts
(docs/calibration-fit.md). Each was a sampled mutant no test read."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from simulators.calibrate import predict
from simulators.parallel import run_jobs


def _settings(tmp_path: Path, steps: int = 10) -> predict.Settings:
    return predict.Settings(draws=1, seeds=1, steps=steps, batch=8, lr_scale=1.0, optimizer="sgd", workers=1,
                            out=tmp_path)


def test_a_prediction_run_shorter_than_100_steps_logs_every_step(tmp_path: Path) -> None:
    settings = _settings(tmp_path, steps=10)
    config = predict.sim_config(settings, {"num_prompts": 64, "num_groups": 2}, "grpo", 0, 1.0)
    [summary] = run_jobs([(config, tmp_path / "run", False)], workers=1, progress=False)
    assert summary.steps.tolist() == list(range(1, 11))
    assert summary.scalars["mean_success"].size == 10   # the last tenth (final_success) is the last step's own


def test_a_long_prediction_run_logs_about_50_steps() -> None:
    for steps, every in ((99, 1), (100, 2), (250, 5)):
        world = {"num_prompts": 64, "num_groups": 2}
        config = predict.sim_config(_settings(Path("unused"), steps=steps), world, "grpo", 0, 1.0)
        assert config.log_every == every   # every step below 100 steps, then 50 logged steps


def test_grpos_grid_is_extended_at_most_four_sqrt2_steps_past_its_start(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # every world's val accuracy grows with the lr: the best point is always the highest, so the grid grows
    # upwards until the cap: 2 x sqrt(2)^4 = 8 (and never below its start, x0.5)
    def fake_run(jobs: list[Any], settings: Any, description: str) -> list[Any]:
        return [SimpleNamespace(evals={"val/accuracy": np.array([0.0, config.lr_scale / 100])},
                                scalars={"mean_success": np.array([0.5])})
                for config, *_ in jobs]

    monkeypatch.setattr(predict, "_run", fake_run)
    table = predict.run_all(_settings(tmp_path), [{"num_prompts": 64, "num_groups": 2}])
    points = predict.grid_points(table)
    expected = [0.5 * math.sqrt(2) ** k for k in range(9)]
    assert points == pytest.approx(expected, rel=1e-4)   # grid points are kept to 5 digits
    assert max(points) == pytest.approx(8.0)


def test_the_scaling_extrapolation_is_read_at_steps_x_batch_x_n_bar_rollouts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prediction_table) -> None:
    near = {"lr": 0.01, "R0": 0.2, "A": 0.9, "B": 1.5, "C_mid": 3000.0}
    far = {"lr": 1.0, "R0": 0.1, "A": 0.5, "B": 1.0, "C_mid": 10.0}
    fit = {"difficulty": {"draws": {"difficulty_offset": [-1.0, -1.0]}}, "scaling": [far, near],
           "plan": {"lr": 0.008}}
    cal = predict.Calibrated({"world": {"num_prompts": 64, "num_groups": 2}}, fit, tmp_path)

    def fake_run_all(settings: Any, worlds: list[dict[str, Any]]) -> dict[str, np.ndarray]:
        table = prediction_table(np.zeros(len(worlds)), 0.0)
        table["grpo@1|final_success"] = np.full((len(worlds), 2), 0.5)
        return table

    monkeypatch.setattr(predict, "run_all", fake_run_all)
    settings = predict.Settings(draws=1, seeds=2, steps=30, batch=16, lr_scale=1.0, optimizer="sgd", workers=1,
                                out=tmp_path, n_bar=5)
    scaling = predict.predict(cal, settings)["scaling"]
    rollouts = 30 * 16 * 5   # steps x batch x n_bar
    by_hand = 0.2 + (0.9 - 0.2) / (1 + (3000.0 / rollouts) ** 1.5)
    assert scaling["lr"] == 0.01 and scaling["rollouts"] == rollouts
    assert scaling["success"] == pytest.approx(by_hand, rel=1e-12)
