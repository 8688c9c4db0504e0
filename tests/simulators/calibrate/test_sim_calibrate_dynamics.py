"""Stage 2 of the calibration: the least-squares solver, the profiled residuals, and a small recovery."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import least_squares, minimize_scalar

from simulators.calibrate import dynamics as Dy
from simulators.calibrate.lsq import levenberg_marquardt
from simulators.calibrate.recovery import synthetic_data, truth_world
from simulators.world import WorldConfig

T = np.linspace(0, 3, 25)


def curve_residuals(x_MP: np.ndarray, problem_M: np.ndarray, data_QT: np.ndarray) -> np.ndarray:
    """r = a exp(-b t) - y_q(t): one nonlinear least-squares problem per q."""
    a, b = x_MP[:, :1], x_MP[:, 1:]
    return a * np.exp(-b * T[None]) - data_QT[problem_M]


def test_levenberg_marquardt_matches_scipy_on_several_problems() -> None:
    rng = np.random.default_rng(0)
    data = np.stack([a * np.exp(-b * T) + 0.01 * rng.standard_normal(T.size) for a, b in ((2.0, 1.3), (0.5, 0.2))])
    x, cost = levenberg_marquardt(lambda x, q: curve_residuals(x, q, data), np.array([[1.0, 0.5], [1.0, 0.5]]),
                                  np.array([0.0, 0.0]), np.array([10.0, 10.0]), iterations=60, diff_step=1e-6)
    for q in range(2):
        ref = least_squares(lambda v: curve_residuals(v[None], np.array([q]), data)[0], [1.0, 0.5])
        np.testing.assert_allclose(x[q], ref.x, rtol=2e-3)  # it stops when a step gains < 1e-4 of the cost
        assert cost[q] == pytest.approx(2 * ref.cost, rel=1e-4)


def test_levenberg_marquardt_respects_the_box() -> None:
    data = np.stack([3.0 * np.exp(-1.0 * T)])
    x, _ = levenberg_marquardt(lambda x, q: curve_residuals(x, q, data), np.array([[1.0, 0.5]]),
                               np.array([0.0, 0.0]), np.array([2.0, 10.0]), iterations=40)
    assert x[0, 0] == pytest.approx(2.0)


def test_profiled_offsets_minimise_the_residuals() -> None:
    """h0 and the success level are the weighted least-squares offsets: no other value does better."""
    rng = np.random.default_rng(1)
    L, B, E, K = 3, 4, 2, 2
    sim = Dy.Simulated(rng.random((1, L, B)), np.zeros((1, L, B)), np.zeros((1, L, B)), rng.random((1, L, E, K)),
                       np.zeros((1, L, E, K)))
    held = rng.random((L, E, K))
    held[0, 0, 0] = np.nan
    obs = Dy.Observation(rng.random((L, B)), held, np.full((L, E, K), 0.01))
    w = Dy.Weights(rng.uniform(0.01, 0.03, (L, B)), rng.uniform(0.01, 0.03, (L, E, K)))
    r, offsets = Dy.residuals(sim, obs, w)
    assert np.all(np.isfinite(r))
    for k in range(K):
        ok = np.isfinite(held[..., k])

        def cost(h: float) -> float:
            return float(np.sum(((h + sim.delta[0, ..., k] - held[..., k]) / w.heldout[..., k])[ok] ** 2))

        assert offsets[0, k] == pytest.approx(minimize_scalar(cost).x, abs=1e-6)
    level = minimize_scalar(lambda c: float(np.sum(((c + sim.success[0] - obs.success_LB) / w.success) ** 2))).x
    assert offsets[0, -1] == pytest.approx(level, abs=1e-6)


@pytest.mark.slow
def test_small_recovery_of_the_dynamics() -> None:
    """The fast version of the recovery study (docs/calibration.md): a small known world, data from the
    simulator's loop; the identified settings are recovered and the intervals cover most of the truth."""
    truth = truth_world("middle", num_prompts=800, num_groups=4, seed=3)
    sample, sweep = synthetic_data(truth, lrs=(0.25, 1.0, 4.0), batch=48, n=4, steps=45, eval_every=15, k=8, seed=3)
    design = Dy.Design(world=WorldConfig(num_prompts=800, num_groups=4, group_hardness_rank=truth.group_hardness_rank,
                                         **{k: getattr(truth, k) for k in ("difficulty_offset", "group_difficulty_scale",
                                                                           "group_difficulty_tail", "prompt_difficulty_scale",
                                                                           "prompt_difficulty_tail", "unsolvable_frac",
                                                                           "always_solved_frac", "aggregation")}),
                       lrs=sweep.lrs, lr_ref=1.0, batch=48, n=4, steps=45, eval_steps=np.array([15, 30, 45]), block=5,
                       seeds=(101, 102, 103, 104))
    fit = Dy.fit_dynamics(design, Dy.observation(sweep, design), pooled=False, boots=24, pilot=24, log=lambda _: None)
    assert fit.values["lr_group"] == pytest.approx(truth.lr_group, rel=0.5)
    covered = {n: fit.interval(n)[0] <= getattr(truth, n) <= fit.interval(n)[1] for n in Dy.PARAMS}
    assert sum(covered.values()) >= len(Dy.PARAMS) - 1, (covered, fit.values)
