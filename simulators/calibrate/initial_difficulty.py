"""Stage 1 of the calibration: the world's initial difficulty distribution from per-prompt successes.

Data: prompt i of group g(i) was sampled n_i times and solved c_i times (``gdro eval
--save-samples`` on a sample of the training set, at the training sampling). Model (the world's
own, ``simulators.world._difficulty`` at the start, when every skill is 0)::

    d_i = d0 + c_g H_r(g(i)) + c_p E_i,  E_i ~ Lomax(alpha_p),  p_i = sigmoid(-d_i)
    H_r = Lomax(alpha_g) quantile at (r + 1/2)/K, r = the group's hardness rank (0 = easiest)
    with probability u: d_i + 12 (never solved); with probability s: d_i - 12 (always solved)
    c_i | p_i ~ Binomial(n_i, p_i)

fitted on the table N[g, n, c] of prompt counts (E on NODES equal-probability cells), intervals from
posterior draws; group ranks from the data (mean success); the Zipf exponent s_z and the
rarity-hardness correlation rho from the group counts, with bootstrap intervals. Detail:
docs/calibration-notes.md#simulators-calibrate-initial_difficulty.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import minimize, minimize_scalar
from scipy.special import expit, gammaln
from scipy.stats import spearmanr

from gdro_lab import ConfigError
from simulators.calibrate.lengths import LengthSamples
from simulators.calibrate.posterior import central_interval
from simulators.world import lomax_quantile

NODES = 128
"""Equal-probability cells of the Lomax used to integrate E (midpoint rule)."""
SHIFT = 12.0
"""Difficulty shift of the never- and always-solved prompts (the world's)."""
#: Fitted world fields, in the order of the fitting vector, with their boxes (natural units).
PARAMS = ("difficulty_offset", "group_difficulty_scale", "group_difficulty_tail", "prompt_difficulty_scale",
          "prompt_difficulty_tail", "unsolvable_frac", "always_solved_frac")
BOX = {"difficulty_offset": (-15.0, 15.0), "group_difficulty_scale": (1e-3, 20.0),
       "group_difficulty_tail": (0.2, 50.0), "prompt_difficulty_scale": (1e-2, 20.0),
       "prompt_difficulty_tail": (0.2, 50.0), "unsolvable_frac": (0.0, 0.95), "always_solved_frac": (0.0, 0.95)}
LOG_PARAMS = ("group_difficulty_scale", "group_difficulty_tail", "prompt_difficulty_scale", "prompt_difficulty_tail")


@dataclass(frozen=True)
class SuccessCounts:
    """Per-prompt successes: ``group_P`` (index into ``group_names``), ``successes_P`` of ``samples_P``;
    ``lengths``: per-response token counts when the samples carry them (the length fit's data)."""

    group_names: tuple[str, ...]
    group_P: np.ndarray
    successes_P: np.ndarray
    samples_P: np.ndarray
    lengths: LengthSamples | None = None

    def __post_init__(self) -> None:
        sizes = {np.asarray(a).shape for a in (self.group_P, self.successes_P, self.samples_P)}
        if len(sizes) != 1 or len(next(iter(sizes))) != 1:
            raise ConfigError("success counts: group_P, successes_P and samples_P must be 1-D of one length")
        if np.any(self.samples_P < 1) or np.any(self.successes_P < 0) or np.any(self.successes_P > self.samples_P):
            raise ConfigError("success counts: need 0 <= successes <= samples and samples >= 1 per prompt")

    @property
    def num_groups(self) -> int:
        return len(self.group_names)

    def table(self) -> dict[int, np.ndarray]:
        """N[n] of shape (K, n + 1): prompts of each group with c successes out of n samples."""
        out: dict[int, np.ndarray] = {}
        for n in np.unique(self.samples_P):
            mask = self.samples_P == n
            counts = np.zeros((self.num_groups, int(n) + 1))
            np.add.at(counts, (self.group_P[mask], self.successes_P[mask]), 1.0)
            out[int(n)] = counts
        return out

    def group_success(self) -> np.ndarray:
        """Mean success rate per group, (K,)."""
        K = self.num_groups
        return (np.bincount(self.group_P, self.successes_P, K) / np.maximum(np.bincount(self.group_P, self.samples_P, K), 1))


def hardness_ranks(success_K: np.ndarray) -> np.ndarray:
    """Rank of each group by difficulty: 0 = the highest mean success (easiest), ties by index."""
    order = np.argsort(-np.asarray(success_K, float), kind="stable")
    ranks = np.empty(order.size, np.int64)
    ranks[order] = np.arange(order.size)
    return ranks


def group_offsets(values: dict[str, Any], ranks_K: np.ndarray) -> np.ndarray:
    """a_g = d0 + c_g H_r(g), H_r the Lomax(alpha_g) quantile at (r + 1/2)/K; values scalars (K,) or (M,) (M, K)."""
    K = ranks_K.size
    tail = np.asarray(values["group_difficulty_tail"], float)[..., None]
    hardness = lomax_quantile((np.arange(K) + 0.5) / K, tail)[..., ranks_K]
    return (np.asarray(values["difficulty_offset"], float)[..., None]
            + np.asarray(values["group_difficulty_scale"], float)[..., None] * hardness)


def count_pmf(values: dict[str, Any], ranks_K: np.ndarray, n: int, nodes: int = NODES) -> np.ndarray:
    """P(c successes of n | group), shape (K, n + 1) (or (M, K, n + 1) for M parameter sets at once),
    the mixture of the module docstring."""
    def arr(name: str) -> np.ndarray:
        return np.asarray(values[name], float)[..., None, None]

    u_Q = (np.arange(nodes) + 0.5) / nodes
    e_Q = lomax_quantile(u_Q, np.asarray(values["prompt_difficulty_tail"], float)[..., None])[..., None, :]
    d_KQ = group_offsets(values, ranks_K)[..., :, None] + arr("prompt_difficulty_scale") * e_Q
    u, s = arr("unsolvable_frac"), arr("always_solved_frac")
    c = np.arange(n + 1)
    binom_C = np.exp(gammaln(n + 1) - gammaln(c + 1) - gammaln(n - c + 1))
    pmf = 0.0
    for weight, shift in ((1.0 - u - s, 0.0), (u, SHIFT), (s, -SHIFT)):
        p = expit(-(d_KQ + shift))[..., None]
        # p^c and (1-p)^(n-c) by cumulative products (no transcendental per c)
        ones = np.ones(p.shape)
        up = np.cumprod(np.concatenate([ones, np.broadcast_to(p, p.shape[:-1] + (n,))], axis=-1), axis=-1)
        down = np.cumprod(np.concatenate([ones, np.broadcast_to(1.0 - p, p.shape[:-1] + (n,))], axis=-1),
                          axis=-1)[..., ::-1]
        pmf = pmf + weight * (binom_C * up * down).mean(axis=-2)
    return np.asarray(pmf)


def _to_values(x: np.ndarray, free: tuple[str, ...], fixed: dict[str, float]) -> dict[str, Any]:
    """Fitting vector(s) (..., len(free)) -> world values (scalars or arrays)."""
    values: dict[str, Any] = {k: np.full(x.shape[:-1], v) if x.ndim > 1 else v for k, v in fixed.items()}
    for j, name in enumerate(free):
        v = x[..., j]
        values[name] = np.clip(np.exp(v) if name in LOG_PARAMS else v, *BOX[name])
    if x.ndim == 1:
        values = {k: float(v) for k, v in values.items()}
    return values


def _to_vector(values: dict[str, float], free: tuple[str, ...]) -> np.ndarray:
    return np.array([np.log(values[n]) if n in LOG_PARAMS else values[n] for n in free])


def _bounds(free: tuple[str, ...]) -> list[tuple[float, float]]:
    return [(float(np.log(BOX[n][0])), float(np.log(BOX[n][1]))) if n in LOG_PARAMS else BOX[n] for n in free]


def negative_loglik(values: dict[str, Any], ranks_K: np.ndarray, table: dict[int, np.ndarray]) -> Any:
    """- sum_{g,n,c} N[g,n,c] log P(c | g, n) (a penalty where u + s > 0.99); one value per parameter set."""
    excess = np.asarray(values["unsolvable_frac"]) + np.asarray(values["always_solved_frac"]) - 0.99
    total = 1e3 * np.maximum(excess, 0.0) ** 2
    for n, counts in table.items():
        pmf = count_pmf(values, ranks_K, n)
        total = total - np.sum(counts * np.log(np.maximum(pmf, 1e-300)), axis=(-2, -1))
    return total


def _objective(x: np.ndarray, free: tuple[str, ...], fixed: dict[str, float], ranks_K: np.ndarray,
               table: dict[int, np.ndarray], step: float = 1e-5) -> tuple[float, np.ndarray]:
    """Negative log-likelihood and its forward-difference gradient, all in one batched evaluation."""
    points = np.vstack([x, x + step * np.eye(x.size)])
    nll = negative_loglik(_to_values(points, free, fixed), ranks_K, table)
    return float(nll[0]), (nll[1:] - nll[0]) / step


def free_params(num_groups: int) -> tuple[tuple[str, ...], dict[str, float]]:
    """Fitted names and fixed values: with one group its scale and tail are not identified (c_g = 0)."""
    if num_groups > 1:
        return PARAMS, {}
    return tuple(p for p in PARAMS if p not in ("group_difficulty_scale", "group_difficulty_tail")), {
        "group_difficulty_scale": 0.0, "group_difficulty_tail": 2.5}


def starts(data: SuccessCounts) -> list[dict[str, float]]:
    """A few starting points spread over plausible worlds (the likelihood can have several modes)."""
    rate = float(np.clip(data.successes_P.sum() / data.samples_P.sum(), 0.02, 0.98))
    d_mid = -float(np.log(rate / (1 - rate)))
    base = {"group_difficulty_scale": 0.5, "group_difficulty_tail": 2.5, "prompt_difficulty_tail": 1.5}
    return [{**base, "difficulty_offset": d_mid + offset_shift, "prompt_difficulty_scale": scale,
             "unsolvable_frac": u, "always_solved_frac": s}
            for scale, offset_shift, u, s in ((1.0, -1.0, 0.05, 0.05), (3.0, -3.0, 0.1, 0.02), (0.5, 0.0, 0.0, 0.0),
                                              (2.0, -2.0, 0.2, 0.2))]


def fit_mle(ranks_K: np.ndarray, table: dict[int, np.ndarray], initial: list[dict[str, float]]
            ) -> tuple[dict[str, float], float]:
    """Maximum likelihood over the box (L-BFGS-B from each start); returns (values, negative loglik)."""
    free, fixed = free_params(ranks_K.size)
    best: tuple[dict[str, float], float] | None = None
    for start in initial:
        x0 = np.clip(_to_vector({**start, **fixed}, free), *np.array(_bounds(free)).T)
        result = minimize(_objective, x0, args=(free, fixed, ranks_K, table), jac=True, method="L-BFGS-B",
                          bounds=_bounds(free))
        values = _to_values(result.x, free, fixed)
        nll = float(negative_loglik(values, ranks_K, table))
        if best is None or nll < best[1]:
            best = (values, nll)
    assert best is not None
    return best


def zipf_exponent(sizes_K: np.ndarray) -> float:
    """MLE of s in |D_k| ∝ (k+1)^-s from the group counts sorted largest first (0 with one group)."""
    counts = np.sort(np.asarray(sizes_K, float))[::-1]
    if counts.size < 2:
        return 0.0
    rank = np.log(np.arange(counts.size) + 1.0)

    def nll(s: float) -> float:
        log_p = -s * rank - np.log(np.sum(np.exp(-s * rank)))
        return -float(np.sum(counts * log_p))

    return float(minimize_scalar(nll, bounds=(0.0, 10.0), method="bounded").x)


def rarity_hardness_corr(sizes_K: np.ndarray, ranks_K: np.ndarray) -> float:
    """Spearman correlation of rarity (0 = the largest group) and hardness rank (0 when K < 3)."""
    if sizes_K.size < 3:
        return 0.0
    rarity = np.argsort(np.argsort(-np.asarray(sizes_K), kind="stable"), kind="stable")
    value = spearmanr(rarity, ranks_K).statistic
    return float(value) if np.isfinite(value) else 0.0


@dataclass
class DifficultyFit:
    """Stage-1 result: estimates (world fields), posterior draws, and what the report plots."""

    values: dict[str, float]
    draws: dict[str, np.ndarray]
    ranks_K: np.ndarray
    group_names: tuple[str, ...]
    sizes_K: np.ndarray
    negative_loglik: float
    table: dict[int, np.ndarray] = field(default_factory=dict)

    def interval(self, name: str) -> tuple[float, float]:
        return tuple(float(v) for v in central_interval(self.draws[name]))  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        return {"values": self.values, "intervals": {n: self.interval(n) for n in self.draws},
                "draws": {n: v.tolist() for n, v in self.draws.items()}, "ranks": self.ranks_K.tolist(),
                "groups": list(self.group_names), "sizes": self.sizes_K.tolist(),
                "negative_loglik": self.negative_loglik}


def posterior_draws(ranks_K: np.ndarray, table: dict[int, np.ndarray], values: dict[str, float], count: int,
                    rng: np.random.Generator) -> np.ndarray:
    """Draws (count, free) from the likelihood under a flat prior on the fitting coordinates within the box
    (``simulators.calibrate.posterior.metropolis``, 24 chains started around the MLE). Where the likelihood has a
    ridge (a heavy tail and a never-solved mass both make prompts that are never solved), the chains walk
    along it; a percentile bootstrap of the MLE stays near the estimate and under-covers."""
    from simulators.calibrate.posterior import metropolis

    free, fixed = free_params(ranks_K.size)
    lo, hi = np.array(_bounds(free)).T

    def log_post(x: np.ndarray) -> np.ndarray:
        return -negative_loglik(_to_values(x, free, fixed), ranks_K, table)

    return metropolis(log_post, _to_vector(values, free), np.diag((0.05 * (hi - lo)) ** 2), lo, hi, rng, count,
                      chains=24, burn=400, keep=200)


def fit_difficulty(data: SuccessCounts, boots: int = 100, seed: int = 0) -> DifficultyFit:
    """MLE of the difficulty distribution with ``boots`` posterior draws (flat prior; the intervals), and the
    group structure (Zipf exponent, rarity-hardness correlation) with nonparametric-bootstrap replicates."""
    ranks = hardness_ranks(data.group_success())
    table = data.table()
    values, nll = fit_mle(ranks, table, starts(data))
    sizes = np.bincount(data.group_P, minlength=data.num_groups)
    values["size_exponent"] = zipf_exponent(sizes)
    values["size_difficulty_corr"] = rarity_hardness_corr(sizes, ranks)
    rng = np.random.default_rng(seed)
    free, fixed = free_params(ranks.size)
    posterior = _to_values(posterior_draws(ranks, table, values, max(boots, 2), rng), free, fixed)
    draws: dict[str, Any] = {name: np.asarray(posterior[name], float) for name in PARAMS}
    structure: dict[str, list[float]] = {"size_exponent": [], "size_difficulty_corr": []}
    for _ in range(max(boots, 2)):
        pick = rng.integers(0, data.group_P.size, data.group_P.size)
        resampled = SuccessCounts(data.group_names, data.group_P[pick], data.successes_P[pick], data.samples_P[pick])
        boot_sizes = np.bincount(resampled.group_P, minlength=data.num_groups)
        structure["size_exponent"].append(zipf_exponent(boot_sizes))
        structure["size_difficulty_corr"].append(rarity_hardness_corr(boot_sizes, hardness_ranks(resampled.group_success())))
    draws.update({k: np.array(v) for k, v in structure.items()})
    return DifficultyFit(values, draws, ranks, data.group_names, sizes, nll, table)
