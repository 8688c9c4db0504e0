"""Report statistics: the studies' CI against scipy, factorial effects against naive means."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from simulators.studies import ablation
from studykit.stats import mean_ci


def test_mean_ci_matches_scipy() -> None:
    x = np.array([0.31, 0.35, 0.29, 0.4, 0.33])
    mean, half = mean_ci(x)
    low, high = stats.t.interval(0.95, df=4, loc=x.mean(), scale=stats.sem(x))
    assert float(mean) == pytest.approx(x.mean())
    assert float(half) == pytest.approx((high - low) / 2)
    assert np.isnan(mean_ci(np.array([0.5]))[1])


def test_factorial_effects_recover_an_additive_model() -> None:
    """A noise-free response with known main effects, one interaction and a seed block."""
    design = [(levels, s) for levels in ablation.cells() for s in range(2)]
    names = list(ablation.FACTORS)
    truth = {"bins": 0.04, "debias": -0.02, "weights": 0.01}
    rng = np.random.default_rng(0)
    y = []
    for levels, s in design:
        code = {n: 1.0 if levels[n] == ablation.FACTORS[n][1] else -1.0 for n in names}
        value = 0.3 + 0.05 * s + sum(e / 2 * code[n] for n, e in truth.items())
        value += 0.03 / 2 * code["signal"] * code["allocator"]
        y.append(value + 1e-9 * rng.standard_normal())
    rows = {r["term"]: r for r in ablation.effects(design, np.array(y))}
    for name in names:
        assert rows[name]["effect"] == pytest.approx(truth.get(name, 0.0), abs=1e-7)
    assert rows["signal × allocator"]["effect"] == pytest.approx(0.03, abs=1e-7)
    # Naive check of one main effect: mean at high minus mean at low.
    high = np.mean([v for (lv, _), v in zip(design, y) if lv["bins"] == 10])
    low = np.mean([v for (lv, _), v in zip(design, y) if lv["bins"] == 6])
    assert rows["bins"]["effect"] == pytest.approx(high - low, abs=1e-7)
