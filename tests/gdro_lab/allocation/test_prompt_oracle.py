"""The per-prompt oracle plan against brute force and the per-prompt SE report by hand."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gdro_lab.allocation.prompt_oracle import oracle_plan, prompt_se_report


@pytest.mark.parametrize("seed", range(6))
def test_oracle_plan_minimises_the_variance_proxy(seed):
    rng = np.random.default_rng(seed)
    v = rng.uniform(0, 1, 4) * (rng.random(4) < 0.8)
    total = 4 * 4
    best = min(sum(v / np.array(n)) for n in itertools.product(range(2, 9), repeat=4) if sum(n) == total)
    plan = oracle_plan(v, total, 2, 8)
    assert plan.sum() == total and plan.min() >= 2 and plan.max() <= 8
    assert float(np.sum(v / plan)) == pytest.approx(best, rel=1e-12)


def test_prompt_se_report_by_hand():
    v = np.array([1.0, 0.0, 0.25])
    out = prompt_se_report(v, np.array([8, 2, 2]), 4)
    # Eq. 28: (1/8 + 0 + 0.25/2) / ((1 + 0.25) / 4) = 0.25 / 0.3125 -> 20% reduction
    assert out["var_reduction_pct"] == pytest.approx(20.0)
    # Eq. 33: (1/sqrt 8 + 0.5/sqrt 2) / (1.5 / 2)
    assert out["wse_reduction_pct"] == pytest.approx(100 * (1 - (8 ** -0.5 + 0.5 * 2 ** -0.5) / 0.75))
    assert np.isnan(prompt_se_report(np.zeros(3), np.array([4, 4, 4]), 4)["var_reduction_pct"])
