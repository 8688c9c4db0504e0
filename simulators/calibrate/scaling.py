"""ScaleRL's sigmoid of pass rate against RL compute (arXiv 2510.13786), R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B),
fitted to each sweep run's batch success against the rollouts consumed before it (C = (step - 1) x batch x n;
R0 = the first batch's, held fixed). ``gdro predict`` prints it at the planned run's compute beside the world's
prediction: a second opinion that knows nothing of difficulty, extrapolated far past a short sweep.
Detail: docs/calibration.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import least_squares


def sigmoid(compute: np.ndarray, r0: float, a: float, b: float, c_mid: float) -> np.ndarray:
    """ScaleRL's curve at ``compute`` (> 0)."""
    return r0 + (a - r0) / (1.0 + (c_mid / np.asarray(compute, float)) ** b)


def fit_sigmoid(compute: np.ndarray, success: np.ndarray) -> dict[str, float]:
    """Least-squares fit of A in [R0, 1], B in [0.05, 10] and C_mid in [min C / 100, max C x 100] (log
    coordinates for B and C_mid) on the points with C > 0, from a grid of starts; R0 = the first finite
    success (a batch's success is measured before its update: step t has consumed C = (t - 1) x batch x n)."""
    compute, success = np.asarray(compute, float), np.asarray(success, float)
    r0 = float(success[np.isfinite(success)][0])
    ok = np.isfinite(success) & (compute > 0)
    c, r = compute[ok], success[ok]
    lo = np.array([r0, np.log(0.05), np.log(c[0] / 100)])
    hi = np.array([1.0 + 1e-9, np.log(10.0), np.log(c[-1] * 100)])

    def residual(x: np.ndarray) -> np.ndarray:
        return sigmoid(c, r0, x[0], np.exp(x[1]), np.exp(x[2])) - r

    best = None
    for a in (min(1.0, r0 + 0.1), min(1.0, r0 + 0.4)):
        for c_mid in (np.median(c), c[-1] * 3):
            start = np.clip([a, 0.0, np.log(c_mid)], lo + 1e-9, hi - 1e-9)
            fit = least_squares(residual, start, bounds=(lo, hi))
            if best is None or fit.cost < best.cost:
                best = fit
    assert best is not None
    return {"R0": r0, "A": float(best.x[0]), "B": float(np.exp(best.x[1])), "C_mid": float(np.exp(best.x[2])),
            "rmse": float(np.sqrt(np.mean(best.fun**2)))}


def sweep_fits(sweep: Any) -> list[dict[str, Any]]:
    """One fit per sweep run: its lr and the sigmoid's parameters (compute in rollouts)."""
    out = []
    for run in sweep.runs:
        compute = np.arange(run.success_T.size) * sweep.batch * sweep.n  # before step t's update
        out.append({"lr": float(run.lr), **fit_sigmoid(compute, run.success_T)})
    return out


def extrapolate(fits: list[dict[str, Any]], lr: float, rollouts: float) -> dict[str, Any] | None:
    """The fit of the sweep run nearest ``lr`` (log scale) and its success at ``rollouts``."""
    if not fits:
        return None
    fit = min(fits, key=lambda f: abs(np.log(f["lr"] / lr)))
    return {**fit, "rollouts": float(rollouts),
            "success": float(sigmoid(np.array([rollouts]), fit["R0"], fit["A"], fit["B"], fit["C_mid"])[0])}
