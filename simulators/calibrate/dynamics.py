"""Stage 2 of the calibration: learning speed, price of a step, score noise and transfer, by simulation.

Data (``observe.Sweep``): plain GRPO at L learning rates lr_j, each run's training-batch success
per step and its held-out accuracy per group (or pooled) at its evaluation steps. Model: the
stage-1 world, trained by plain GRPO (:mod:`.fastsim`) with the settings theta::

    lr_group, lr_prompt (lr_shared = SHARED_RATIO lr_group), curvature, score_noise (tau), transfer, update_noise

at lr_scale_j = lr_j / lr_ref. Discrepancy (weighted least squares, Wood 2010's synthetic likelihood)::

    r_success[j, b] = (mean_seeds sim_success[j, b] - obs_success[j, b]) / sigma_b     (W-step blocks)
    r_heldout[j, e, k] = (h0_k + mean_seeds delta_sim[j, e, k] - obs[j, e, k]) / sigma_e
    delta_sim = held-out accuracy at step t minus at step 0;  h0_k profiled out (weighted mean)

minimised by Levenberg-Marquardt on common random numbers; intervals from posterior draws
(:func:`posterior`). The sigmas and why the fit is smooth: docs/calibration-notes.md#simulators-calibrate-dynamics.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from simulators.calibrate.fastsim import run_grpo
from simulators.calibrate.lsq import levenberg_marquardt
from simulators.calibrate.posterior import central_interval, metropolis, shrunk_precision
from simulators.calibrate.observe import Sweep
from simulators.world import WorldConfig

PARAMS = ("lr_group", "lr_prompt", "curvature", "score_noise", "transfer", "update_noise")
BOX = {"lr_group": (1e-3, 100.0), "lr_prompt": (1e-4, 100.0), "curvature": (1e-3, 20.0),
       "score_noise": (0.05, 20.0), "transfer": (0.0, 1.0), "update_noise": (1e-3, 2.0)}
LINEAR = ("transfer",)
SHARED_RATIO = 0.05
"""lr_shared / lr_group, fixed at the default world's 0.01 / 0.2: a shared gain and a transferred group gain
move every group alike, so a sweep cannot tell them apart (fitting both would leave a flat ridge)."""
PILOT = {"lr_group": (0.01, 10.0), "lr_prompt": (3e-3, 10.0), "curvature": (3e-3, 3.0),
         "score_noise": (0.1, 10.0), "transfer": (0.0, 1.0), "update_noise": (5e-3, 0.5)}
"""Where the pilot search looks (inside BOX): the plausible range of each setting."""
DIFF_STEP = 0.05


def to_values(x: np.ndarray) -> dict[str, np.ndarray]:
    """Fitting coordinates (..., 6) -> world settings (log scale except transfer)."""
    out = {name: np.clip(x[..., j] if name in LINEAR else np.exp(x[..., j]), *BOX[name]) for j, name in enumerate(PARAMS)}
    out["lr_shared"] = SHARED_RATIO * out["lr_group"]
    return out


def to_vector(values: dict[str, float]) -> np.ndarray:
    return np.array([values[n] if n in LINEAR else np.log(values[n]) for n in PARAMS], float)


def box() -> tuple[np.ndarray, np.ndarray]:
    lo = np.array([BOX[n][0] if n in LINEAR else np.log(BOX[n][0]) for n in PARAMS])
    hi = np.array([BOX[n][1] if n in LINEAR else np.log(BOX[n][1]) for n in PARAMS])
    return lo, hi


@dataclass
class Observation:
    """One sweep's summaries as arrays: success blocks (L, Nb) and held-out (L, E, K), NaN = missing."""

    success_LB: np.ndarray
    heldout_LEK: np.ndarray
    heldout_se_LEK: np.ndarray


@dataclass
class Design:
    """What the simulation must reproduce: the world, the sweep's settings and the fitting seeds."""

    world: WorldConfig
    lrs: np.ndarray
    lr_ref: float
    batch: int
    n: int
    steps: int
    eval_steps: np.ndarray
    block: int
    seeds: tuple[int, ...] = (101, 102, 103, 104)

    @property
    def num_blocks(self) -> int:
        return self.steps // self.block


def observation(sweep: Sweep, design: Design) -> Observation:
    """Block means of the batch success and the held-out table aligned to ``design.eval_steps``."""
    L, E = len(sweep.runs), design.eval_steps.size
    K = len(sweep.group_names)
    success = np.full((L, design.num_blocks), np.nan)
    held = np.full((L, E, K), np.nan)
    held_se = np.full((L, E, K), np.nan)
    for j, run in enumerate(sweep.runs):
        blocks = run.success_T[:design.num_blocks * design.block].reshape(design.num_blocks, design.block)
        with np.errstate(invalid="ignore"):
            success[j] = np.nanmean(np.where(np.isfinite(blocks), blocks, np.nan), axis=1)
        for e, step in enumerate(design.eval_steps):
            hit = np.flatnonzero(run.eval_steps_E == step)
            if hit.size:
                held[j, e], held_se[j, e] = run.heldout_EK[hit[-1]], run.heldout_se_EK[hit[-1]]
    return Observation(success, held, held_se)


@dataclass
class Simulated:
    """Seed means and spreads of the simulated summaries for M candidates: (M, L, ...)."""

    success: np.ndarray
    success_var: np.ndarray
    observed_var: np.ndarray
    delta: np.ndarray
    delta_var: np.ndarray
    samples_observed: np.ndarray = field(default_factory=lambda: np.zeros(0))
    samples_delta: np.ndarray = field(default_factory=lambda: np.zeros(0))


def simulate(design: Design, x_MP: np.ndarray, pooled: bool, seeds: tuple[int, ...] | None = None) -> Simulated:
    """Run GRPO at every sweep lr for every candidate and seed; summaries per candidate and lr."""
    M, L = x_MP.shape[0], design.lrs.size
    values = {k: np.repeat(v, L) for k, v in to_values(x_MP).items()}
    values["lr_scale"] = np.tile(design.lrs / design.lr_ref, M)
    blocks, observed, deltas = [], [], []
    for seed in seeds or design.seeds:
        curves = run_grpo(design.world, seed, batch=design.batch, n=design.n, steps=design.steps,
                          eval_steps=[0, *design.eval_steps.tolist()], values=values, count=M * L)
        cut = design.num_blocks * design.block
        blocks.append(curves.success_MT[:, :cut].reshape(M, L, design.num_blocks, design.block).mean(-1))
        observed.append(curves.observed_MT[:, :cut].reshape(M, L, design.num_blocks, design.block).mean(-1))
        held = curves.heldout_ME[..., None] if pooled else curves.heldout_MEK
        index = np.searchsorted(curves.eval_steps, design.eval_steps)
        deltas.append((held[:, index] - held[:, :1]).reshape(M, L, design.eval_steps.size, -1))
    b, o, d = np.stack(blocks), np.stack(observed), np.stack(deltas)
    ddof = 1 if b.shape[0] > 1 else 0
    # One run's spread around the expectation, without its level (profiled out like h0), pooled over the
    # blocks of an lr (success) and over the lrs (held-out): a 4-seed variance per cell would be too noisy.
    centred = o - o.mean(axis=(2, 3), keepdims=True)
    observed_var = np.broadcast_to(centred.var(0, ddof=ddof).mean(axis=2, keepdims=True), b.shape[1:])
    delta_var = np.broadcast_to(d.var(0, ddof=ddof).mean(axis=1, keepdims=True), d.shape[1:])
    return Simulated(b.mean(0), b.var(0, ddof=ddof), observed_var, d.mean(0), delta_var, o, d)


@dataclass
class Weights:
    """Standard deviations of the residuals (fixed during a fit): success (L, Nb), held-out (L, E, K)."""

    success: np.ndarray
    heldout: np.ndarray


def weights(sim: Simulated, index: int, obs: Observation, seeds: int) -> Weights:
    """sigma^2 = one run's spread around its expectation + the simulated mean's error (+ the eval's SE)."""
    success = np.sqrt(sim.observed_var[index] + sim.success_var[index] / seeds)
    se = np.nan_to_num(obs.heldout_se_LEK, nan=0.0)
    heldout = np.sqrt(se**2 + sim.delta_var[index] * (1 + 1 / seeds))
    return Weights(np.maximum(success, 2e-3), np.maximum(heldout, 2e-3))


def residuals(sim: Simulated, obs: Observation, w: Weights) -> tuple[np.ndarray, np.ndarray]:
    """(residuals (M, N), profiled offsets (M, K + 1): held-out h0 per group, then the success level)
    of every candidate against ``obs`` (whose arrays are (L, ...) or per candidate (M, L, ...))."""
    M = sim.success.shape[0]
    gap_success = obs.success_LB - sim.success
    weight_success = np.where(np.isfinite(gap_success), 1.0 / w.success**2, 0.0)
    level = np.sum(np.nan_to_num(gap_success) * weight_success, axis=(1, 2)) / np.maximum(
        weight_success.sum(axis=(1, 2)), 1e-12)
    r_success = (level[:, None, None] - np.nan_to_num(gap_success)) * np.sqrt(weight_success)
    gap = obs.heldout_LEK - sim.delta
    weight = np.where(np.isfinite(gap), 1.0 / w.heldout**2, 0.0)
    h0 = np.sum(np.nan_to_num(gap) * weight, axis=(1, 2)) / np.maximum(weight.sum(axis=(1, 2)), 1e-12)
    r_held = (h0[:, None, None, :] - np.nan_to_num(gap, nan=0.0)) * np.sqrt(weight)
    r = np.concatenate([r_success.reshape(M, -1), r_held.reshape(M, -1)], axis=1)
    return r, np.concatenate([h0, level[:, None]], axis=1)


def pilot_starts(count: int, rng: np.random.Generator) -> np.ndarray:
    """Stratified (Latin hypercube) candidates over the PILOT ranges in fitting coordinates."""
    lo = to_vector({n: PILOT[n][0] for n in PARAMS})
    hi = to_vector({n: PILOT[n][1] for n in PARAMS})
    strata = (np.argsort(rng.random((len(PARAMS), count)), axis=1).T + rng.random((count, len(PARAMS)))) / count
    return lo + strata * (hi - lo)


@dataclass
class DynamicsFit:
    """Stage-2 result: estimates, posterior draws, fit quality and the fitted curves."""

    values: dict[str, float]
    draws: dict[str, np.ndarray]
    chi2_red: float
    h0: np.ndarray
    simulated: Simulated
    observed: Observation
    weights: Weights
    extra: dict[str, Any] = field(default_factory=dict)

    def interval(self, name: str) -> tuple[float, float]:
        return tuple(float(v) for v in central_interval(self.draws[name]))  # type: ignore[return-value]


def _fit_one(design: Design, obs: Observation, pooled: bool, pilot: int, rng: np.random.Generator,
             log: Callable[[str], None]) -> tuple[np.ndarray, Weights, np.ndarray]:
    """Pilot search, then Levenberg-Marquardt from the 3 best pilots, weights refreshed at the optimum.
    Returns (the optimum, the weights, the three local optima: the posterior's other starting points)."""
    candidates = pilot_starts(pilot, rng)
    provisional = Weights(np.full(obs.success_LB.shape, 0.02), np.maximum(np.nan_to_num(obs.heldout_se_LEK), 0.01))
    sim = simulate(design, candidates, pooled)
    cost = np.sum(residuals(sim, obs, provisional)[0] ** 2, axis=1)
    top = np.argsort(cost)[:3]
    w = weights(sim, int(top[0]), obs, len(design.seeds))
    log(f"calibrate: pilot search over {pilot} settings done; refining the best 3")

    def fn(x: np.ndarray, _problem: np.ndarray) -> np.ndarray:
        return residuals(simulate(design, x, pooled), obs, w)[0]

    local, cost = levenberg_marquardt(fn, candidates[top], *box(), diff_step=DIFF_STEP)
    best = local[np.argmin(cost)]
    w = weights(simulate(design, best[None], pooled), 0, obs, len(design.seeds))
    x, _ = levenberg_marquardt(fn, best[None], *box(), diff_step=DIFF_STEP)
    return x[0], w, local


def realisations(design: Design, x: np.ndarray, offsets: np.ndarray, obs: Observation, pooled: bool,
                 seeds: tuple[int, ...], rng: np.random.Generator) -> list[Observation]:
    """Sweeps simulated at ``x`` with new seeds: the sampled batch success and the held-out accuracy plus the
    eval's measurement noise, at the observed cells (what Sigma of the synthetic likelihood is estimated from)."""
    sim = simulate(design, x[None], pooled, seeds=seeds)
    h0, level = offsets[:-1], offsets[-1]
    se = np.nan_to_num(obs.heldout_se_LEK)
    out = []
    for b in range(len(seeds)):
        held = h0 + sim.samples_delta[b, 0] + se * rng.standard_normal(se.shape)
        out.append(Observation(np.where(np.isfinite(obs.success_LB), sim.samples_observed[b, 0] + level, np.nan),
                               np.where(np.isfinite(obs.heldout_LEK), held, np.nan), obs.heldout_se_LEK))
    return out


def jacobian(design: Design, x: np.ndarray, obs: Observation, w: Weights, pooled: bool,
             step: float = 2 * DIFF_STEP) -> np.ndarray:
    """d residuals / d x at ``x`` by central differences (N, p), one-sided at the box's edges."""
    lo, hi = box()
    eye = np.eye(x.size)
    up, down = np.minimum(x + step, hi), np.maximum(x - step, lo)
    probes = np.concatenate([up * eye + x * (1 - eye), down * eye + x * (1 - eye)])
    r = residuals(simulate(design, probes, pooled), obs, w)[0]
    return ((r[:x.size] - r[x.size:]) / (up - down)[:, None]).T


def linearised_draws(jac: np.ndarray, x: np.ndarray, r_b: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One Gauss-Newton step from ``x`` per simulated sweep b: x - (J'J)^-1 J' (r_b - mean r_b), in the box
    (the sandwich covariance of the weighted least-squares fit; the posterior's first proposal). A setting
    the curves do not move at all (a zero Jacobian column) is drawn over its whole range."""
    lo, hi = box()
    noise = r_b - r_b.mean(axis=0)
    draws = lo + rng.random((r_b.shape[0], x.size)) * (hi - lo)
    informed = np.sum(jac**2, axis=0) > 1e-12 * max(float(np.sum(jac**2)), 1e-300)
    if informed.any():
        sub = jac[:, informed]
        jtj = sub.T @ sub
        steps = -np.linalg.solve(jtj + 1e-6 * np.trace(jtj) * np.eye(sub.shape[1]), sub.T @ noise.T).T
        draws[:, informed] = np.clip(x[informed] + steps, lo[informed], hi[informed])
    return draws


def posterior(design: Design, x: np.ndarray, starts: np.ndarray, obs: Observation, w: Weights, pooled: bool,
              draws: int, rng: np.random.Generator, log: Callable[[str], None]) -> tuple[np.ndarray, np.ndarray, float]:
    """(the synthetic likelihood's mode, draws of theta from it, its misfit scale); simulators.calibrate.posterior.

    Sigma comes from 40 sweeps simulated at ``x`` (the weighted least-squares fit). The mode is refitted
    with whitened residuals from ``x`` and the other local optima ``starts``; the chains start at all of
    them (why: docs/calibration-notes.md#simulators-calibrate-dynamics).
    """
    fitted = simulate(design, x[None], pooled)
    r_data, offsets = residuals(fitted, obs, w)
    sweeps = realisations(design, x, offsets[0], obs, pooled, tuple(9000 + 7 * b for b in range(40)), rng)
    r_b = np.stack([residuals(fitted, sweep, w)[0][0] for sweep in sweeps])
    dof = max(int(np.count_nonzero(r_data[0])) - len(PARAMS) - offsets.shape[1], 1)
    precision, scale = shrunk_precision(r_b, r_data[0], dof)
    root = np.linalg.cholesky(precision)  # r' P r = |r L|^2

    def whitened(xs: np.ndarray, _problem: np.ndarray) -> np.ndarray:
        return residuals(simulate(design, xs, pooled), obs, w)[0] @ root

    lo, hi = box()
    modes, cost = levenberg_marquardt(whitened, np.vstack([x[None], starts]), lo, hi, diff_step=DIFF_STEP)
    order = np.argsort(cost)
    start = linearised_draws(jacobian(design, x, obs, w, pooled), x, r_b, rng)
    cov0 = np.cov(start.T) + 1e-4 * np.diag((hi - lo) ** 2)
    log(f"calibrate: sampling the dynamics posterior (misfit scale {scale:.2f})")

    def log_post(xs: np.ndarray) -> np.ndarray:
        return -0.5 * np.sum(whitened(xs, np.zeros(len(xs), np.int64)) ** 2, axis=1)

    samples = metropolis(log_post, modes[order], cov0, lo, hi, rng, count=draws, chains=24, burn=100, keep=80)
    return modes[order[0]], samples, scale


def fit_dynamics(design: Design, obs: Observation, pooled: bool, boots: int = 40, pilot: int = 64, seed: int = 0,
                 log: Callable[[str], None] = print) -> DynamicsFit:
    """Fit theta to the sweep (see the module docstring); ``boots`` posterior draws give the intervals."""
    rng = np.random.default_rng(seed)
    x, w, starts = _fit_one(design, obs, pooled, pilot, rng, log)
    draws, scale = x[None], 1.0
    if boots > 0:
        x, draws, scale = posterior(design, x, starts, obs, w, pooled, boots, rng, log)
    sim = simulate(design, x[None], pooled)
    r, offsets = residuals(sim, obs, w)
    dof = max(int(np.count_nonzero(r[0])) - len(PARAMS) - offsets.shape[1], 1)  # K held-out offsets + the level
    chi2 = float(np.sum(r[0] ** 2)) / dof
    log(f"calibrate: dynamics fitted (reduced chi2 {chi2:.2f})")
    values = {k: float(v) for k, v in to_values(x).items()}
    draw_values = {k: np.asarray(v) for k, v in to_values(draws).items()}
    return DynamicsFit(values, draw_values, chi2, offsets[0], sim, obs, w,
                       {"x": x.tolist(), "draws_x": draws.tolist(), "dof": dof, "misfit_scale": scale})


def fitted_world(world: WorldConfig, values: dict[str, float]) -> WorldConfig:
    """The world with the fitted learner settings (lr_shared = SHARED_RATIO lr_group)."""
    changes: dict[str, Any] = {k: float(values[k]) for k in PARAMS}
    changes["lr_shared"] = SHARED_RATIO * changes["lr_group"]
    return replace(world, **changes)
