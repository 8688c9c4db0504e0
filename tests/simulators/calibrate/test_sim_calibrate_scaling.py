"""ScaleRL's sigmoid (arXiv 2510.13786) beside the world: the fit recovers a known curve, the compute axis is the
rollouts consumed, and the sweep run nearest the planned lr is the one extrapolated."""

from __future__ import annotations

import numpy as np
import pytest

from simulators.calibrate import scaling
from simulators.calibrate.observe import Sweep, SweepRun


@pytest.mark.parametrize("a,b,c_mid", [(0.8, 1.5, 4000.0), (0.55, 0.7, 20000.0), (0.95, 3.0, 1500.0)])
def test_the_fit_recovers_a_known_curve(a: float, b: float, c_mid: float) -> None:
    compute = np.arange(120) * 64 * 4.0  # step 1's batch is sampled before any update: C = 0
    r0 = 0.2
    success = np.concatenate([[r0], scaling.sigmoid(compute[1:], r0, a, b, c_mid)])
    fit = scaling.fit_sigmoid(compute, success)
    assert fit["R0"] == r0
    assert fit["A"] == pytest.approx(a, abs=0.02) and fit["B"] == pytest.approx(b, rel=0.1)
    assert fit["C_mid"] == pytest.approx(c_mid, rel=0.1) and fit["rmse"] < 5e-3


def test_the_curve_is_the_papers_formula() -> None:
    c = np.array([1.0, 10.0, 100.0])
    expected = [0.1 + (0.9 - 0.1) / (1 + (10.0 / x) ** 2) for x in c]
    np.testing.assert_allclose(scaling.sigmoid(c, 0.1, 0.9, 2.0, 10.0), expected)
    assert scaling.sigmoid(np.array([10.0]), 0.1, 0.9, 2.0, 10.0)[0] == pytest.approx(0.5)  # half the gain at C_mid


def test_sweep_fits_count_rollouts_and_extrapolate_the_nearest_lr() -> None:
    steps = np.arange(1, 61)
    runs = []
    for lr, c_mid in ((1e-5, 3000.0), (3e-5, 1500.0), (1e-4, 800.0)):
        curve = np.concatenate([[0.3], scaling.sigmoid((steps[1:] - 1) * 32 * 4.0, 0.3, 0.7, 1.2, c_mid)])
        runs.append(SweepRun(lr, curve, np.array([60]), np.zeros((1, 1)), np.zeros((1, 1)), f"grpo-lr{lr:g}"))
    fits = scaling.sweep_fits(Sweep(runs, ("all",), 32, 4, 60, "rollout", 1.0))
    assert [f["lr"] for f in fits] == [1e-5, 3e-5, 1e-4]
    assert [f["C_mid"] for f in fits] == pytest.approx([3000.0, 1500.0, 800.0], rel=0.1)  # compute = (step - 1) x 32 x 4
    picked = scaling.extrapolate(fits, 2.5e-5, 200 * 64 * 4)
    assert picked is not None and picked["lr"] == 3e-5
    assert picked["success"] == pytest.approx(scaling.sigmoid(np.array([51200.0]), 0.3, 0.7, 1.2, 1500.0)[0], abs=0.01)
    assert scaling.extrapolate([], 1e-5, 100) is None
