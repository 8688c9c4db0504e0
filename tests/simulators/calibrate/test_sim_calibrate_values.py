"""Calibrate helpers by value where sampled mutants survived the calibrate tests: the plan's refit command
puts the new runs after the sweep's own, and the synthetic likelihood's precision is built from the sample
covariance over the B simulated residual vectors (divisor B - 1), shrunk halfway to its diagonal."""

from __future__ import annotations

import shlex
from pathlib import Path

import numpy as np

from simulators.calibrate.next_sweep import _commands
from simulators.calibrate.posterior import SHRINKAGE, shrunk_precision


def test_the_refit_command_adds_the_planned_runs_after_the_sweeps_own():
    fit = {"dynamics": {"eval_steps": [10, 20, 30]}, "command": "gdro calibrate --sweep runs/a runs/b --out cal"}
    loop, refit, predict = _commands(fit, {"lrs": [0.001, 0.004], "steps": 30}, Path("cal"))
    assert shlex.split(refit) == ["gdro", "calibrate", "--sweep", "runs/a", "runs/b", "runs/plan-lr0.001",
                                  "runs/plan-lr0.004", "--out", "cal"]
    assert "eval.every=10" in loop and predict == "gdro predict cal/world.toml"


def test_shrunk_precision_is_the_inverse_of_the_shrunk_sample_covariance():
    rng = np.random.default_rng(0)
    residuals_BN = rng.normal(size=(12, 3)) * np.array([1.0, 2.0, 0.5])      # B = 12 draws of N = 3 residuals
    sample = np.cov(residuals_BN, rowvar=False)                                # divisor B - 1
    sigma = (1 - SHRINKAGE) * sample + SHRINKAGE * np.diag(np.diag(sample))
    precision, scale = shrunk_precision(residuals_BN, np.zeros(3), dof=3)      # data on the mean: scale 1
    assert scale == 1.0
    np.testing.assert_allclose(precision, np.linalg.inv(sigma), rtol=1e-12)
