"""DUET's early stopping in the simulator (``abort_horizon`` > 0): the tokens and weights of every rollout
against a per-rollout loop written from the rule's statement, the exact rollout budget, aborted rollouts out
of the controllers' feedback and the update, kept tails' weights in the gradient, resume, and the arena's DUET."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gdro_lab import ConfigError, MethodStep, read_run
from simulators import loop
from simulators.learner import Learner
from simulators.loop import Simulation, resume_simulation, run_simulation
from simulators.simulator_config import SimConfig
from simulators.world import WorldConfig, make_world, sample_lengths

# LLM-like lengths (a long tail past the check) so that every branch of the rule is taken in a few steps
LONG = WorldConfig(num_prompts=600, num_groups=8, lengths=True, length_log_mean=6.0, length_hardness=1.0,
                   length_failure=0.5, length_log_sd=0.5, max_new_tokens=1500)
HORIZON, GRACE, KEEP = 700, 50, 0.25


def config(**kw) -> SimConfig:
    base = dict(method="duet", steps=30, batch=48, eval_every=10, world=LONG, abort_horizon=HORIZON,
                abort_grace=GRACE, abort_keep_prob=KEEP)
    return SimConfig(**{**base, **kw})


def rule_by_hand(length: int, u: float) -> tuple[int, float]:
    """(tokens, weight) of one rollout, from the rule as stated: the answer ends a rollout; check at horizon +
    grace; a rollout ended by then is whole; one still running there is aborted at the check, or with
    probability KEEP runs to its end with weight 1 / KEEP."""
    check = HORIZON + GRACE
    if length <= check:
        return length, 1.0
    if u < KEEP:
        return length, 1.0 / KEEP
    return check, 0.0


class Spy:
    """Records the lengths drawn and the feedback each step gives the controllers."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.lengths: list[np.ndarray] = []
        self.feedback: list = []
        monkeypatch.setattr(loop, "sample_lengths", self._lengths)
        observe = MethodStep.observe

        def spy_observe(step, feedback, **kw):
            self.feedback.append(feedback)
            return observe(step, feedback, **kw)

        monkeypatch.setattr(MethodStep, "observe", spy_observe)

    def _lengths(self, *args):
        self.lengths.append(sample_lengths(*args))
        return self.lengths[-1]


def uniforms(seed: int, sizes: list[int]) -> list[np.ndarray]:
    """The abort rule's draws: the sixth child of the run's seed, in step order."""
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(6)[5])
    return [rng.random(n) for n in sizes]


def test_tokens_weights_and_feedback_follow_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = Spy(monkeypatch)
    cfg = config(seed=3)
    sim = Simulation(cfg)
    records = [sim.step() for _ in range(cfg.steps)]
    draws = uniforms(3, [x.size for x in spy.lengths])
    branches = set()
    total_saved = total_aborted = 0
    for (scalars, _), lengths, u, fb in zip(records, spy.lengths, draws, spy.feedback):
        by_hand = [rule_by_hand(int(n), float(v)) for n, v in zip(lengths, u)]
        tokens = np.array([t for t, _ in by_hand])
        weights = np.array([w for _, w in by_hand])
        branches.update(weights.tolist())
        assert scalars["compute/rollouts_generated"] == cfg.batch * cfg.n_bar  # the budget: every rollout started
        assert scalars["compute/tokens_generated"] == tokens.sum()
        assert scalars["compute/tokens_saved"] == (lengths - tokens).sum()
        assert scalars["compute/rollouts_aborted"] == np.sum(weights == 0)
        assert scalars["compute/rollouts_kept_tail"] == np.sum(weights > 1)
        total_saved += int((lengths - tokens).sum())
        total_aborted += int(np.sum(weights == 0))
        assert np.all(fb.counts_P >= 2) and fb.counts_P.sum() <= np.sum(weights > 0)  # in detail: the next test
    assert branches == {0.0, 1.0, 1.0 / KEEP}  # every branch of the rule was taken
    final = sim.evaluate()
    assert final["tokens_saved_total"] == total_saved and final["rollouts_aborted_total"] == total_aborted
    assert final["rollouts_total"] == cfg.steps * cfg.batch * cfg.n_bar


def test_feedback_holds_exactly_the_scored_rollouts_of_prompts_with_two(monkeypatch: pytest.MonkeyPatch) -> None:
    """Per prompt (the plan's order): scored = rollouts with weight > 0; the feedback lists the prompts with at
    least 2, with those counts and those rollouts' successes."""
    spy = Spy(monkeypatch)
    plans: list[np.ndarray] = []
    successes: list[np.ndarray] = []
    plan = MethodStep.plan

    def spy_plan(step, index):
        out = plan(step, index)
        plans.append(out.counts_P.copy())
        return out

    monkeypatch.setattr(MethodStep, "plan", spy_plan)
    draw = loop.sample_rollouts

    def spy_rollouts(*args):
        successes.append(draw(*args))
        return successes[-1]

    monkeypatch.setattr(loop, "sample_rollouts", spy_rollouts)
    weights_seen: list[np.ndarray] = []
    gradient = Learner.gradient

    def spy_gradient(learner, successes_R, counts_B, p_B, noise_R=None, weights_R=None):
        weights_seen.append(weights_R)
        return gradient(learner, successes_R, counts_B, p_B, noise_R, weights_R)

    monkeypatch.setattr(Learner, "gradient", spy_gradient)
    se_counts: list[np.ndarray] = []
    prompt_se = Simulation._prompt_se

    def spy_se(sim, variance_P, counts_P):
        se_counts.append(counts_P)
        return prompt_se(sim, variance_P, counts_P)

    monkeypatch.setattr(Simulation, "_prompt_se", spy_se)
    cfg = config(seed=5, steps=10, log_every=1)
    sim = Simulation(cfg)
    records = [sim.step() for _ in range(cfg.steps)]
    draws = uniforms(5, [x.size for x in spy.lengths])
    left_out = 0
    for counts, y, lengths, u, fb, w, (scalars, _) in zip(plans, successes, spy.lengths, draws, spy.feedback,
                                                          weights_seen, records):
        expected_counts, expected_y, expected_w, tokens = [], [], [], 0
        start = 0
        for n in counts:
            rule = [rule_by_hand(int(lengths[j]), float(u[j])) for j in range(start, start + n)]
            kept = [start + j for j, (_, weight) in enumerate(rule) if weight > 0]
            if len(kept) >= 2:
                expected_counts.append(len(kept))
                expected_y.extend(y[kept].tolist())
                expected_w.extend(weight for _, weight in rule if weight > 0)
                tokens += sum(t for t, weight in rule if weight > 0)
            else:
                left_out += 1
            start += n
        assert fb.counts_P.tolist() == expected_counts
        assert fb.successes_R.tolist() == expected_y
        np.testing.assert_array_equal(fb.rewards_R, 2.0 * np.asarray(expected_y, float) - 1.0)
        assert w.tolist() == expected_w  # the update weighs kept tails (DUET has no selector: all seen trained)
        assert scalars["compute/tokens_trained"] == tokens
    assert left_out > 0  # some prompt lost its group in these steps
    # the SE diagnostics judge the allocator's plan (every rollout it asked for), not what the rule left
    assert [c.tolist() for c in se_counts] == [c.tolist() for c in plans]


def test_kept_tails_weigh_their_gradient_terms() -> None:
    """Learner.gradient with weights: g_i = (1/n_i) sum_j w_ij A_ij (y_ij - p_i), by a loop."""
    world_cfg = replace(LONG, score_noise=0.0)
    learner = Learner(world_cfg, make_world(world_cfg, np.random.default_rng(0)))
    counts = np.array([3, 4])
    y = np.array([1, 0, 0, 1, 1, 0, 1])
    w = np.array([1.0, 4.0, 1.0, 1.0, 1.0, 4.0, 1.0])
    p = np.array([0.3, 0.6])
    got, _ = learner.gradient(y, counts, p, None, w)
    start, expected = 0, []
    for n, pi in zip(counts, p):
        r = 2.0 * y[start:start + n] - 1.0
        sd = r.std()
        adv = (r - r.mean()) / (sd + 1e-6)
        expected.append(sum(w[start + j] * adv[j] * (y[start + j] - pi) for j in range(n)) / n)
        start += n
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    plain, _ = learner.gradient(y, counts, p, None, None)
    assert not np.allclose(plain, got)


def test_resume_with_early_stopping_is_bit_identical(tmp_path: Path) -> None:
    cfg = config(snapshot_every=10)
    full = run_simulation(cfg, tmp_path / "full")
    copy = tmp_path / "copy"
    shutil.copytree(full, copy)
    resume_simulation(copy, step=20)
    for name in ("steps.jsonl", "eval.jsonl"):
        assert (copy / name).read_bytes() == (full / name).read_bytes(), name
    run = read_run(full)
    assert run.scalars["compute/rollouts_aborted"].sum() > 0
    assert run.config["abort_horizon"] == HORIZON  # config.json carries it when on


def test_off_leaves_the_run_and_its_config_as_before(tmp_path: Path) -> None:
    on = Simulation(config(steps=5, abort_horizon=10**6))  # a check no rollout reaches: the rule never acts
    off = Simulation(config(steps=5, abort_horizon=0))
    for _ in range(5):
        a, b = on.step(), off.step()
        same = [k for k in b[0] if not k.startswith("compute/")]
        np.testing.assert_array_equal([a[0][k] for k in same], [b[0][k] for k in same])  # NaN == NaN here
    assert "abort_horizon" not in config(abort_horizon=0).to_dict()


def test_early_stopping_needs_lengths() -> None:
    with pytest.raises(ConfigError, match="abort_horizon=5 is invalid: must be 0 unless world.lengths"):
        SimConfig(world=replace(LONG, lengths=False), abort_horizon=5)
    with pytest.raises(ConfigError, match="abort_keep_prob"):
        config(abort_keep_prob=0.0)


def test_the_arena_runs_duet_with_early_stopping() -> None:
    from simulators.studies import allocation_arena
    from simulators.studies.common import StudySettings
    assert allocation_arena.METHOD_SETTINGS["duet"]["abort_horizon"] > 0
    settings = StudySettings(out=Path("unused"), steps=5, batch=8, prompts=100, seeds=1, world={"lengths": True})
    jobs = []
    original = allocation_arena.run_jobs
    try:
        allocation_arena.run_jobs = lambda js, **kw: jobs.extend(js) or []  # type: ignore[assignment]
        allocation_arena._cached_points(settings, [("duet", 1.0), ("vip", 1.0)], Path("unused"), "default", "")
    finally:
        allocation_arena.run_jobs = original  # type: ignore[assignment]
    by_method = {cfg.method: cfg for cfg, _, _ in jobs}
    assert by_method["duet"].abort_horizon == allocation_arena.METHOD_SETTINGS["duet"]["abort_horizon"]
    assert by_method["vip"].abort_horizon == 0


def test_a_step_with_nothing_scored_spends_its_rollouts_and_learns_nothing(tmp_path: Path) -> None:
    """A check at 1 token with keep 0.01 aborts nearly everything: steps where no prompt keeps two rollouts
    update neither controllers nor learner, yet are logged with their compute and the run ends whole."""
    cfg = config(steps=6, abort_horizon=1, abort_grace=0, abort_keep_prob=0.01, log_every=1, eval_every=3)
    run = read_run(run_simulation(cfg, tmp_path / "run"))
    assert run.steps.tolist() == list(range(1, 7))  # every step logged, the last one too
    np.testing.assert_array_equal(run.scalars["compute/rollouts_generated"], cfg.batch * cfg.n_bar)
    assert np.all(run.scalars["compute/rollouts_trained"] == 0)
    sim = Simulation(cfg)
    before = sim.learner.prompt_skill_P.copy(), sim.learner.shared
    for _ in range(cfg.steps):
        sim.step()
    np.testing.assert_array_equal(sim.learner.prompt_skill_P, before[0])
    assert sim.learner.shared == before[1] and sim.rollouts_total == cfg.steps * cfg.batch * cfg.n_bar
