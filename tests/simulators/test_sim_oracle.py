"""The simulator's reference allocators: the per-prompt Bayes reference's variances against closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from gdro_lab.controllers.feedback import StepFeedback
from simulators.oracle import PromptBayesAllocator


def observed(pool_P, counts, successes):
    """A Bayes reference with the pool's prior that has seen prompts a, b, ... with the given outcomes."""
    allocator = PromptBayesAllocator()
    ids = [chr(ord("a") + i) for i in range(len(counts))]
    y = np.asarray(successes, bool)
    allocator.update(StepFeedback(ids, np.zeros(len(ids), np.int64), np.asarray(counts), 2.0 * y - 1, y))
    allocator.observe_truth(np.zeros(len(ids)), np.asarray(pool_P, float))
    return allocator, allocator.variances(allocator.stats.rows(ids))


def test_under_a_flat_prior_the_variance_is_the_beta_posteriors():
    """A pool spread evenly over the 400 bins is a flat prior: the posterior after s successes in m rollouts is
    Beta(a, b), a = s + 1, b = m - s + 1, and E[4 p (1 - p)] = 4 a b / ((a + b) (a + b + 1)) (up to the grid)."""
    pool = (np.arange(4000) + 0.5) / 4000
    counts, successes = [1, 4, 12, 6], [1] + [1, 0, 0, 0] + [1] * 11 + [0] + [0] * 6
    _, v = observed(pool, counts, successes)
    s, m = np.array([1, 1, 11, 0]), np.array(counts)
    a, b = s + 1.0, m - s + 1.0
    np.testing.assert_allclose(v, 4 * a * b / ((a + b) * (a + b + 1)), rtol=2e-4)


def test_under_a_skewed_prior_the_variance_weighs_successes_and_failures_apart():
    """A pool on [0, 0.5) only (1e-3 elsewhere): the posterior is the prior times p^s (1 - p)^(m - s), so the
    moments are incomplete beta integrals over each half; s and m - s swapped give other variances here
    (under a flat prior they would not, 4 p (1 - p) being symmetric)."""
    pool = (np.arange(2000) + 0.5) / 4000
    counts, successes = [4, 4, 10], [1, 0, 0, 0] + [1, 1, 1, 0] + [1] * 7 + [0] * 3
    _, v = observed(pool, counts, successes)
    density = np.array([10.0 + 1e-3, 1e-3])          # 10 pool prompts per bin below 0.5, none above
    for i, (s, m) in enumerate([(1, 4), (3, 4), (7, 10)]):
        def mass(a, b):
            halves = np.diff(special.betainc(a, b, np.array([0.0, 0.5, 1.0])))
            return float((density * halves).sum() * special.beta(a, b))
        expected = 4 * mass(s + 2, m - s + 2) / mass(s + 1, m - s + 1)
        assert v[i] == pytest.approx(expected, rel=1e-3), (s, m)
    assert v[0] != pytest.approx(v[1], rel=1e-2)     # 1 of 4 and 3 of 4 differ under this prior


def test_the_plan_spends_the_budget_on_the_seen_prompts_by_their_variances():
    allocator, v = observed((np.arange(4000) + 0.5) / 4000, [4, 4], [1, 1, 0, 0] + [0, 0, 0, 0])
    plan = allocator.plan(np.zeros(3, np.int64), ["a", "b", "unseen"])
    assert plan[2] == allocator.config.n_bar and plan.sum() == 3 * allocator.config.n_bar
    assert plan[0] > plan[1] and v[0] > v[1]


def test_the_prompt_oracle_plans_each_batch_on_its_own_true_success_rates(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a run, the oracle's plan of every step is the exact per-prompt law on 4 p (1 - p) of the very prompts
    it plans, at the learner's state of that step (the truth handed over before the plan), by value."""
    from gdro_lab.allocation.prompt_oracle import oracle_plan
    from gdro_lab.step import MethodStep
    from simulators.loop import Simulation
    from simulators.simulator_config import SimConfig
    from simulators.world import WorldConfig

    cfg = SimConfig(method="prompt_oracle", steps=6, batch=32, eval_every=10,
                    world=WorldConfig(num_prompts=400, num_groups=8))
    sim = Simulation(cfg)
    checked = []
    plan = MethodStep.plan

    def spy_plan(step, ids):
        p = sim.learner.success_prob(np.asarray(ids, np.int64))
        out = plan(step, ids)
        want = oracle_plan(4.0 * p * (1.0 - p), len(p) * cfg.n_bar, cfg.n_min, cfg.n_max)
        checked.append(out.counts_P.tolist() == np.asarray(want).tolist())
        return out

    monkeypatch.setattr(MethodStep, "plan", spy_plan)
    for _ in range(cfg.steps):
        sim.step()
    assert checked == [True] * cfg.steps
