"""Box-constrained Levenberg-Marquardt for many least-squares problems at once (the calibration's stage 2).

Every problem's candidates are evaluated in ONE call of the residual function, so a simulator that
advances many settings together (``simulators.calibrate.fastsim``) pays its per-step overhead once
per iteration for all problems.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

LAMBDAS = np.array([1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0])
"""Damping values tried per iteration (one trial step each, in the same call)."""


def levenberg_marquardt(residual_fn: Callable[[np.ndarray, np.ndarray], np.ndarray], starts_QP: np.ndarray,
                        lo: np.ndarray, hi: np.ndarray, iterations: int = 10, diff_step: float = 0.05
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Minimise sum r^2 for Q problems at once, each from its own start, inside the box [lo, hi].

    ``residual_fn(x_MP, problem_M)`` returns the residuals (M, N) of candidate m against problem
    ``problem_M[m]``. Per iteration: a forward-difference Jacobian (p + 1 candidates per problem,
    steps ``diff_step`` turned inward at the box's upper edge), then one trial step per damping lambda
    in LAMBDAS (solve (J'J + lambda diag J'J) d = -J'r, clipped to the box); the best trial is kept if
    it lowers the cost, else the problem stops. Returns (x (Q, p), cost (Q,)).
    """
    Q, p = starts_QP.shape
    x = np.clip(starts_QP, lo, hi)
    problems = np.arange(Q)
    cost = np.full(Q, np.inf)
    active = np.ones(Q, bool)
    for _ in range(iterations):
        if not active.any():
            break
        act = np.flatnonzero(active)
        step = np.where(x[act] + diff_step <= hi, diff_step, -diff_step)
        probes = np.concatenate([x[act][:, None, :], x[act][:, None, :] + step[:, :, None] * np.eye(p)[None]], 1)
        r = residual_fn(probes.reshape(-1, p), np.repeat(problems[act], p + 1)).reshape(act.size, p + 1, -1)
        cost[act] = np.sum(r[:, 0] ** 2, axis=1)
        jac = np.transpose(r[:, 1:] - r[:, :1], (0, 2, 1)) / step[:, None, :]
        jtj = np.einsum("qnp,qnk->qpk", jac, jac)
        grad = np.einsum("qnp,qn->qp", jac, r[:, 0])
        diag = np.einsum("qpp->qp", jtj) + 1e-9
        trials = np.stack([np.clip(x[act] - np.linalg.solve(jtj + lam * diag[:, :, None] * np.eye(p),
                                                            grad[..., None])[..., 0], lo, hi) for lam in LAMBDAS], 1)
        tr = residual_fn(trials.reshape(-1, p), np.repeat(problems[act], LAMBDAS.size))
        trial_cost = np.sum(tr**2, axis=1).reshape(act.size, LAMBDAS.size)
        best = np.argmin(trial_cost, axis=1)
        better = trial_cost[np.arange(act.size), best] < cost[act] * (1 - 1e-4)
        x[act[better]] = trials[better, best[better]]
        cost[act[better]] = trial_cost[better, best[better]]
        active[act[~better]] = False
    return x, cost
