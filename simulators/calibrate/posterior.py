"""Posterior draws for the calibration's intervals: adaptive random-walk Metropolis, many chains at once.

Both stages draw their parameters this way (a flat prior on the fitting coordinates inside the box):
stage 1 on the exact pass-count likelihood, stage 2 on a Gaussian synthetic likelihood (Wood 2010)
of the learning curves,

    log L(theta) = -1/2 r(theta)' Sigma^-1 r(theta),

r the whitened residuals of the real sweep, Sigma their covariance over sweeps simulated at the
estimate with new seeds (a run's curve drifts as a whole: its errors are correlated over steps and
learning rates, which an independent-residual likelihood would ignore), shrunk half-way to its
diagonal (40 sweeps do not pin a full covariance of ~100 residuals) and scaled by the misfit
max(1, r'Sigma^-1 r / dof). The chains advance together, so each step costs one batched
likelihood call (one simulation of all chains' settings in stage 2).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

SHRINKAGE = 0.5
"""Weight of the diagonal in the shrunk covariance of the simulated residuals."""


def metropolis(log_post: Callable[[np.ndarray], np.ndarray], x0: np.ndarray, cov0: np.ndarray, lo: np.ndarray,
               hi: np.ndarray, rng: np.random.Generator, count: int, chains: int = 16, rounds: int = 4,
               per_round: int = 60, keep: int = 240) -> np.ndarray:
    """``count`` draws (count, p) from exp(log_post) restricted to the box [lo, hi].

    ``chains`` chains start at the rows of ``x0`` (p,) or (Q, p) in turn, jittered by ``cov0``; the proposal is Gaussian with covariance
    ``cov0``, replaced after each of ``rounds`` burn-in rounds of ``per_round`` steps by
    2.38^2/p times the chains' spread in that round (Haario et al. 2001); then ``keep`` steps are kept
    and thinned evenly to ``count`` draws. Proposals outside the box are rejected (flat prior on the box).
    """
    p = np.atleast_2d(x0).shape[1]
    floor = 1e-10 * np.diag((hi - lo) ** 2)
    cov = cov0 + floor
    starts = np.atleast_2d(x0)[np.arange(chains) % np.atleast_2d(x0).shape[0]]
    x = np.clip(starts + 0.3 * rng.standard_normal((chains, p)) @ np.linalg.cholesky(cov).T, lo, hi)
    lp = log_post(x)
    history: list[np.ndarray] = []
    for step in range(rounds * per_round + keep):
        if step and step % per_round == 0 and step <= rounds * per_round:
            spread = np.cov(np.concatenate(history[-per_round:]).T)
            cov = (2.38**2 / p) * spread + floor
        proposal = x + rng.standard_normal((chains, p)) @ np.linalg.cholesky(cov).T
        inside = np.all((proposal >= lo) & (proposal <= hi), axis=1)
        lp_new = np.full(chains, -np.inf)
        if inside.any():
            lp_new[inside] = log_post(proposal[inside])
        accept = np.log(rng.random(chains)) < lp_new - lp
        x[accept], lp[accept] = proposal[accept], lp_new[accept]
        history.append(x.copy())
    pool = np.concatenate(history[rounds * per_round:])
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
