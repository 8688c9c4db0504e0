"""studykit.lrgrid (sqrt(2) grids and their extension) and studykit.stepmatch (the two moments)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gdro_lab import ConfigError
from studykit import lrgrid
from studykit.stepmatch import match_factors, moments


def test_sqrt2_grid_and_check() -> None:
    grid = lrgrid.sqrt2_grid(0.5, 2.0)
    assert len(grid) == 5 and grid[0] == 0.5 and grid[2] == 1.0 and grid[-1] == 2.0
    assert all(b / a == pytest.approx(math.sqrt(2)) for a, b in zip(grid, grid[1:]))
    assert lrgrid.check_grid([2.0, 1.0, 1.41421356237]) == (1.0, 1.41421356237, 2.0)
    with pytest.raises(ConfigError, match="at most sqrt"):
        lrgrid.check_grid([0.5, 1.0, 2.0])  # 2x steps: too coarse
    with pytest.raises(ConfigError, match="> 0"):
        lrgrid.check_grid([0.0, 1.0])
    assert lrgrid.check_grid([1.0]) == (1.0,)


def test_best_and_extension_follow_the_edge() -> None:
    assert lrgrid.best({0.5: 0.3, 1.0: 0.5, 2.0: 0.5}) == 1.0  # ties: the smaller lr
    assert lrgrid.best({0.5: float("nan"), 1.0: 0.1}) == 1.0
    start = lrgrid.sqrt2_grid(0.5, 2.0)
    assert lrgrid.extension(start, [1.0], start) == []
    assert lrgrid.extension(start, [0.5, 1.0], start) == [lrgrid.point(0.5 / math.sqrt(2))]
    assert lrgrid.extension(start, [2.0, 0.5], start) == [lrgrid.point(0.5 / math.sqrt(2)), lrgrid.point(2 * math.sqrt(2))]
    # the cap: at most max_steps points beyond each end of the starting grid
    grown = list(start) + [lrgrid.point(0.5 / math.sqrt(2) ** k) for k in (1, 2)]
    assert lrgrid.extension(grown, [min(grown)], start, max_steps=2) == []
    assert lrgrid.extension(grown, [min(grown)], start, max_steps=3) == [lrgrid.point(0.5 / math.sqrt(2) ** 3)]
    assert lrgrid.extension([1.0], [1.0], [1.0]) == []  # a single point: no tuning
    assert lrgrid.at_edge(start, 2.0) and not lrgrid.at_edge(start, 1.0) and not lrgrid.at_edge([1.0], 1.0)


def test_extension_loop_reaches_an_interior_optimum() -> None:
    """Simulated tuning: scores peak at 0.125; starting at 0.5..2 the loop walks down and stops inside."""
    start = lrgrid.sqrt2_grid(0.5, 2.0)
    grid = list(start)
    score = lambda lr: -abs(math.log2(lr) - math.log2(0.125))  # noqa: E731
    for _ in range(20):
        new = lrgrid.extension(grid, [lrgrid.best({x: score(x) for x in grid})], start)
        if not new:
            break
        grid += new
    best = lrgrid.best({x: score(x) for x in grid})
    assert best == pytest.approx(0.125) and not lrgrid.at_edge(grid, best)


def test_match_factors_are_the_pooled_moments() -> None:
    m1 = np.array([1.0, 1.0, 3.0, 1.0])  # step 1 of run 1
    m2 = np.array([2.0, 2.0, 2.0, 2.0])
    runs = [{"multiplier_mean": np.array([moments(m1)[0], moments(m2)[0]]),
             "multiplier_sq_mean": np.array([moments(m1)[1], moments(m2)[1]])},
            {"multiplier_mean": np.array([1.0, np.nan]), "multiplier_sq_mean": np.array([1.0, np.nan])}]
    factors = match_factors(runs)
    everything = [m1, m2, np.ones(4)]  # the NaN step (nothing logged) is left out
    assert factors.first == pytest.approx(np.mean(np.concatenate(everything)))
    assert factors.second == pytest.approx(np.sqrt(np.mean(np.concatenate(everything) ** 2)))
    assert factors.second >= factors.first
    with pytest.raises(ValueError, match="rerun"):
        match_factors([{"multiplier_mean": np.ones(2)}])
    with pytest.raises(ValueError, match="at least one run"):
        match_factors([])


def test_points_snap_to_the_sqrt2_lattice() -> None:
    assert lrgrid.point(0.707107) == lrgrid.point(2 ** -0.5) == 0.707106781187
    assert lrgrid.point(1.41421) == 1.41421356237 and lrgrid.point(0.3) == 0.3  # off the lattice: kept
    assert lrgrid.check_grid([0.707107, 1]) == (0.707106781187, 1.0)


def test_step_record_logs_the_moments_over_advantage_carrying_rollouts() -> None:
    """multiplier_sq_mean weights m_i^2 by the rollouts of prompt i with an advantage (n_i, or 0 for all-equal rewards)."""
    from gdro_lab import StepFeedback
    from gdro_lab.runformat.record import step_record

    counts = np.array([4, 2, 6])
    rewards = np.array([1, -1, 1, 1,  1, 1,  -1, 1, -1, -1, 1, 1], float)  # prompt 1 all-equal: A = 0
    feedback = StepFeedback(["a", "b", "c"], np.array([0, 1, -1]), counts, rewards, rewards > 0)
    m = np.array([3.0, 10.0, 1.0])
    scalars, _ = step_record(feedback, 3, n_bar=4, n_min=2, n_max=12, multipliers_P=m)
    assert scalars["multiplier_mean"] == pytest.approx(14.0 / 3)
    assert scalars["multiplier_sq_mean"] == pytest.approx((4 * 9 + 6 * 1) / 10)  # prompt 1's 10x costs nothing
    assert moments(m) == pytest.approx((14.0 / 3, (9 + 100 + 1) / 3))  # unweighted when no weights are given
    assert np.isnan(moments(m, np.zeros(3))[1])
