"""The world's response-length model fitted to per-rollout token counts (``gdro eval --save-samples``).

Model (``simulators.world``): L = min(max(round(e^z), 1), cap), z ~ N(mu, s^2), mu = a + b (1 - p) + c (1 - y),
with y the rollout's success, cap the largest count in the data and p the prompt's success probability:
in real data E[p | c of n] under a Beta prior fitted to the pass rates (``posterior_pass``; c/n itself would
bias b towards 0). Maximum likelihood on the exact discrete likelihood, started from OLS on log L::

    P(L = k) = Phi((log(k + 1/2) - mu) / s) - Phi((log(k - 1/2) - mu) / s)   (k = 1: lower end -inf; k = cap: upper +inf)

Why this form, and the pass rate's noise: docs/calibration-notes.md#simulators-calibrate-lengths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import log_ndtr

from gdro_lab import ConfigError

FIELDS = ("length_log_mean", "length_hardness", "length_failure", "length_log_sd")
"""The fitted world fields, in the order of (a, b, c, s); ``max_new_tokens`` is the data's cap."""


@dataclass(frozen=True)
class LengthSamples:
    """One row per response: its prompt's success probability, its success and its generated tokens (>= 1)."""

    pass_R: np.ndarray
    success_R: np.ndarray
    tokens_R: np.ndarray

    def __post_init__(self) -> None:
        if not len({np.shape(self.pass_R), np.shape(self.success_R), np.shape(self.tokens_R)}) == 1:
            raise ConfigError("length samples: pass_R, success_R and tokens_R must have one length")
        if np.size(self.tokens_R) < 8 or np.min(self.tokens_R) < 1:
            raise ConfigError("length samples: need at least 8 responses, each with >= 1 generated token")

    def design(self) -> np.ndarray:
        """Rows (1, 1 - p, 1 - y): the regressors of mu."""
        return np.column_stack([np.ones(self.pass_R.size), 1.0 - self.pass_R, 1.0 - self.success_R.astype(float)])


def posterior_pass(successes: np.ndarray, samples: np.ndarray) -> np.ndarray:
    """E[p | c of n] per prompt under Beta(m t, (1 - m) t), m and t by the moments of the pass rates c/n
    (regression calibration: the noise of c/n would attenuate b); c/n's mean where its spread is all noise."""
    rate, n = successes / samples, float(np.mean(samples))
    m = float(rate.mean())
    var_p = (rate.var() - m * (1 - m) / n) / (1 - 1 / n) if n > 1 else 0.0
    if var_p <= 0:
        return np.full(rate.size, m)
    total = max(m * (1 - m) / var_p - 1, 1e-6)
    return (m * total + successes) / (total + samples)


def ols(samples: LengthSamples) -> np.ndarray:
    """(a, b, c, s) by least squares on log L (ignores rounding and the cap: the MLE's start and a check)."""
    X, y = samples.design(), np.log(samples.tokens_R)
    beta = np.linalg.lstsq(X, y, rcond=None)[0]
    return np.append(beta, np.sqrt(np.mean((y - X @ beta) ** 2)))


def log_likelihood(theta: np.ndarray, samples: LengthSamples, cap: int) -> float:
    """Sum of log P(L = k) at theta = (a, b, c, s) (the module docstring's likelihood)."""
    k = samples.tokens_R.astype(float)
    mu, s = samples.design() @ theta[:3], theta[3]
    lo = np.where(k <= 1, -np.inf, (np.log(k - 0.5) - mu) / s)
    hi = np.where(k >= cap, np.inf, (np.log(k + 0.5) - mu) / s)
    flip = lo > 0  # Phi(hi) - Phi(lo) = Phi(-lo) - Phi(-hi): stay in the accurate lower tail
    upper, lower = log_ndtr(np.where(flip, -lo, hi)), log_ndtr(np.where(flip, -hi, lo))
    return float(np.sum(upper + np.log(-np.expm1(np.minimum(lower - upper, -1e-300)))))


@dataclass(frozen=True)
class LengthFit:
    """The maximum-likelihood world fields (``values``: FIELDS and max_new_tokens), the OLS check, the data."""

    values: dict[str, Any]
    ols: dict[str, float]
    responses: int
    at_cap: float
    """Share of responses at the cap (cut off there, or ending exactly there)."""
    log_likelihood: float

    def to_dict(self) -> dict[str, Any]:
        return {"values": self.values, "ols": self.ols, "responses": self.responses, "at_cap": self.at_cap,
                "log_likelihood": self.log_likelihood}


def fit_lengths(samples: LengthSamples) -> LengthFit:
    """Maximum likelihood (L-BFGS-B in (a, b, c, log s)) from the OLS start."""
    cap = int(np.max(samples.tokens_R))
    check = ols(samples)
    start = np.append(check[:3], np.log(max(check[3], 1e-3)))

    def loss(x: np.ndarray) -> float:
        return -log_likelihood(np.append(x[:3], np.exp(x[3])), samples, cap)

    result = minimize(loss, start, method="L-BFGS-B",
                      bounds=[(-20, 20)] * 3 + [(np.log(1e-3), np.log(10.0))])
    theta = np.append(result.x[:3], np.exp(result.x[3]))
    return LengthFit(values={**{n: float(v) for n, v in zip(FIELDS, theta)}, "max_new_tokens": cap},
                     ols={n: float(v) for n, v in zip(FIELDS, check)}, responses=int(samples.tokens_R.size),
                     at_cap=float(np.mean(samples.tokens_R >= cap)), log_likelihood=-float(result.fun))
