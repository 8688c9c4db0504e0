"""The exact planner's relaxation: the two-shift search on Python floats (the usual bandit step) gives the
Bellman-Ford search's answer, ties included, and the list path (reduced costs as lists) the array path's plans."""

from __future__ import annotations

import numpy as np
import pytest

import gdro_lab.allocation.planner.exact as planner
from gdro_lab.allocation.planner import relax as planner_relax
from gdro_lab.allocation.planner.relax import _bellman_ford, _few_shifts


def _spiky_values(rng: np.random.Generator, bins: int = 10, arms: int = 11) -> np.ndarray:
    """Log-softmax rows as bandit feedback leaves them: a mode near 0, a few arms a little below, the rest far."""
    logits = -rng.exponential(1.0, size=(bins, arms)) * rng.choice([1.0, 30.0, 3000.0], size=(bins, arms), p=[0.3, 0.3, 0.4])
    logits -= logits.max(axis=1, keepdims=True)
    log_soft = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
    return log_soft - 1e-9 * (np.arange(2, 2 + arms) - 4.0) ** 2


@pytest.mark.parametrize("seed", range(4))
def test_two_shift_path_gives_the_bellman_ford_paths_plan(seed: int, monkeypatch) -> None:
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(150):
        values = _spiky_values(rng)
        bins = rng.choice(10, size=256, p=rng.dirichlet(np.full(10, 2.0)))
        cases.append((values, bins))
    used = []
    few = planner_relax._few_shifts
    monkeypatch.setattr(planner_relax, "_few_shifts", lambda *a: used.append(few(*a)) or used[-1])
    fast = [planner.plan_values(values, bins, 1024, 2) for values, bins in cases]
    monkeypatch.setattr(planner_relax, "_few_shifts", lambda *a: None)
    slow = [planner.plan_values(values, bins, 1024, 2) for values, bins in cases]
    assert all(np.array_equal(a, b) for a, b in zip(fast, slow))
    assert sum(found is not None for found in used) > 30  # the two-shift search decided many of them
    monkeypatch.setattr(planner, "relaxed_plan_lists", lambda *a: None)  # the array path only
    arrays = [planner.plan_values(values, bins, 1024, 2) for values, bins in cases]
    assert all(np.array_equal(a, b) for a, b in zip(fast, arrays))


@pytest.mark.parametrize("seed", range(6))
def test_two_shift_search_equals_bellman_ford(seed: int) -> None:
    rng = np.random.default_rng(seed)
    decided = 0
    for _ in range(400):
        arms = int(rng.integers(3, 12))
        m = rng.choice([np.inf, 1.0, 2.0, 3.0], size=2 * arms - 1) if rng.random() < 0.3 \
            else np.where(rng.random(2 * arms - 1) < 0.2, np.inf, rng.exponential(1.0, 2 * arms - 1))
        m[arms - 1] = np.inf  # no cost-free move
        targets = (int(rng.integers(-25, 60)), int(rng.integers(1, arms)), int(rng.integers(0, 30)))
        start, width, h_max = targets
        low = max(-(arms - 1) * 12, min(0, start - width * h_max) - arms + 1)
        top = min((arms - 1) * 12, max(0, start) + arms - 1)
        h_lo, h_hi = max(0, -((top - start) // width)), min(h_max, (start - low) // width)
        if h_lo > h_hi or top < 0 or low > 0:
            continue
        reference = _bellman_ford(m, targets, (low, top, h_lo, h_hi), 12, float(m.min()))
        few = _few_shifts(m.tolist(), start, width, h_lo, h_hi, float(m.min()))
        if few is not None:
            decided += 1
            assert few[0] == reference[0] and few[1] == reference[1] and few[2] == reference[2]
    assert decided > 100
