"""Posterior draws for the calibration's intervals: differential-evolution Markov chains, all advanced at once.

Both stages draw under a flat prior on the fitting coordinates inside the box: stage 1 on the exact
pass-count likelihood, stage 2 on a Gaussian synthetic likelihood (Wood 2010) of the learning curves,

    log L(theta) = -1/2 r(theta)' Sigma^-1 r(theta),

r the whitened residuals of the real sweep, Sigma their covariance over sweeps simulated at the estimate
with new seeds, shrunk half-way to its diagonal and scaled by max(1, r'Sigma^-1 r / dof). Each step
costs one batched likelihood call. Why: docs/calibration-notes.md#simulators-calibrate-posterior.
"""

from __future__ import annotations

from typing import Any, Callable, Final

import numpy as np

INTERVAL_METHOD: Final = "nearest"
"""Percentiles of draws are order statistics (the draw nearest the percentile's position), never an
interpolation between two draws: an order statistic commutes with a monotone map, so an interval taken
on the log scale and one taken on the linear scale are the same two draws (the identification flag and
the printed interval agree), and an interval's ends are values the posterior actually drew."""

SHRINKAGE = 0.5
"""Weight of the diagonal in the shrunk covariance of the simulated residuals."""


def central_interval(draws: np.ndarray, level: float = 0.95, axis: int = 0) -> np.ndarray:
    """The central ``level`` interval of ``draws`` along ``axis`` (two order statistics; see INTERVAL_METHOD)."""
    tail = 50 * (1 - level)
    return np.percentile(draws, [tail, 100 - tail], axis=axis, method=INTERVAL_METHOD)


def medians(draws: dict[str, Any], names: tuple[str, ...]) -> dict[str, float]:
    """Posterior medians of ``names``: the world file's values. A median lies inside its own 95% interval,
    which the best fit need not (it can sit in a corner of a ridge that the posterior mass avoids)."""
    return {name: float(np.median(draws[name])) for name in names}


def side_towards(value: float, median: float, lo: float, hi: float) -> float:
    """The half of the interval [lo, hi] about ``median`` that faces ``value`` (the upper one when they are equal)."""
    return hi - median if value >= median else median - lo


def metropolis(log_post: Callable[[np.ndarray], np.ndarray], x0: np.ndarray, cov0: np.ndarray, lo: np.ndarray,
               hi: np.ndarray, rng: np.random.Generator, count: int, chains: int = 24, burn: int = 240,
               keep: int = 240) -> np.ndarray:
    """``count`` draws (count, p) from exp(log_post) restricted to the box [lo, hi].

    Differential-evolution Markov chains (ter Braak 2006): ``chains`` chains start at the rows of ``x0``
    ((p,) or (Q, p), in turn) spread by N(0, ``cov0``); chain i proposes x_i + gamma (x_a - x_b) + e
    with two other chains a, b, gamma = 2.38 / sqrt(2 p) (1 on every tenth step, so chains can jump
    between modes), e ~ N(0, (1e-4 range)^2). After ``burn`` steps, ``keep`` steps are kept and thinned
    evenly to ``count`` draws. Proposals outside the box are rejected (a flat prior on the box).
    """
    start = np.atleast_2d(x0)
    p = start.shape[1]
    width = hi - lo
    spread = np.linalg.cholesky(cov0 + 1e-10 * np.diag(width**2))
    x = np.clip(start[np.arange(chains) % start.shape[0]] + rng.standard_normal((chains, p)) @ spread.T, lo, hi)
    lp = log_post(x)
    kept: list[np.ndarray] = []
    for step in range(burn + keep):
        gamma = 1.0 if step % 10 == 9 else 2.38 / np.sqrt(2 * p)
        others = np.array([rng.choice(np.delete(np.arange(chains), i), 2, replace=False) for i in range(chains)])
        proposal = x + gamma * (x[others[:, 0]] - x[others[:, 1]]) + 1e-4 * width * rng.standard_normal((chains, p))
        inside = np.all((proposal >= lo) & (proposal <= hi), axis=1)
        lp_new = np.full(chains, -np.inf)
        if inside.any():
            lp_new[inside] = log_post(proposal[inside])
        accept = np.log(rng.random(chains)) < lp_new - lp
        x[accept], lp[accept] = proposal[accept], lp_new[accept]
        if step >= burn:
            kept.append(x.copy())
    pool = np.concatenate(kept)
    return pool[np.linspace(0, pool.shape[0] - 1, count).astype(int)]


def shrunk_precision(residuals_BN: np.ndarray, r_data_N: np.ndarray, dof: int) -> tuple[np.ndarray, float]:
    """(Sigma^-1, misfit scale) of the synthetic likelihood from B simulated residual vectors (see the module)."""
    centred = residuals_BN - residuals_BN.mean(axis=0)
    sample = centred.T @ centred / max(residuals_BN.shape[0] - 1, 1)
    diag = np.diag(np.maximum(np.diag(sample), 1e-6))
    sigma = (1 - SHRINKAGE) * sample + SHRINKAGE * diag
    precision = np.linalg.inv(sigma)
    scale = max(1.0, float(r_data_N @ precision @ r_data_N) / max(dof, 1))
    return precision / scale, scale
