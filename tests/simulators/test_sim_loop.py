"""The training loop: reduction to GRPO, compute neutrality, resume, run-directory completeness."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gdro_lab import ConfigError, read_run
from gdro_lab.methods import METHODS
from gdro_lab.runformat.runlog import load_snapshot
from simulated_run import write_tiny_run
from simulators.loop import Simulation, resume_simulation, run_simulation
from simulators.simulator_config import SimConfig
from simulators.simulator_methods import DEFAULT_METHODS, GROUP_METHODS
from simulators.world import WorldConfig

SMALL = WorldConfig(num_prompts=600, num_groups=8)


def small(method: str, steps: int = 60, **kw) -> SimConfig:
    return SimConfig(method=method, steps=steps, batch=48, eval_every=10, world=SMALL, **kw)


def trajectory(config: SimConfig) -> tuple[np.ndarray, list[dict[str, float]], np.ndarray]:
    sim = Simulation(config)
    shared, evals = [], []
    for t in range(config.steps):
        sim.step()
        shared.append([sim.learner.shared, *sim.learner.group_skill_K])
        if (t + 1) % 10 == 0:
            evals.append(sim.evaluate())
    return np.array(shared), evals, sim.learner.prompt_skill_P.copy()


def test_gdro_with_unit_weights_and_four_rollouts_is_exactly_grpo() -> None:
    """eta = 0 gives omega = 1 (every multiplier 1); n_min = n_max = 4 forces n = 4 everywhere."""
    grpo = trajectory(small("grpo"))
    four = {"n_min": 4, "n_max": 4, "n_bar": 4}
    for config in (small("prompt_gdro", weighter={"eta": 0.0}),
                   small("class_gdro", weighter={"eta": 0.0}),
                   replace(small("rollout_gdro"), **four),
                   replace(small("joint", weighter={"eta": 0.0}), **four)):
        other = trajectory(config)
        np.testing.assert_array_equal(other[0], grpo[0], err_msg=config.method)
        np.testing.assert_array_equal(other[2], grpo[2], err_msg=config.method)
        assert other[1] == grpo[1]
    # mean-1 mode divides uniform weights by their float mean: equal to GRPO up to rounding only.
    mean1 = trajectory(small("prompt_gdro_mean1", weighter={"eta": 0.0}))
    np.testing.assert_allclose(mean1[0], grpo[0], rtol=1e-12, atol=1e-15)


def test_gdro_with_real_weights_differs_from_grpo() -> None:
    """The reduction test above can fail: with the paper's eta the trajectories separate."""
    assert not np.array_equal(trajectory(small("prompt_gdro"))[0], trajectory(small("grpo"))[0])
    assert not np.array_equal(trajectory(small("rollout_gdro"))[0], trajectory(small("grpo"))[0])


def test_compute_neutrality_all_methods(tmp_path: Path) -> None:
    """Every method spends exactly batch * n_bar rollouts per step, so totals agree (within one batch)."""
    totals = {}
    for method in DEFAULT_METHODS:
        run = read_run(run_simulation(small(method, steps=80), tmp_path / method))
        per_step = run.scalars["total_rollouts"]
        assert np.all(per_step == 48 * 4), method
        assert np.all(run.scalars["mean_rollouts"] == 4.0)
        totals[method] = per_step.sum()
        assert run.evals[-1]["metrics"]["rollouts_total"] == totals[method]
    assert max(totals.values()) - min(totals.values()) <= 48 * 4
    assert len(METHODS) >= 7


def test_resume_continues_bit_identically(tmp_path: Path) -> None:
    config = small("joint", steps=40, snapshot_every=10)
    full = run_simulation(config, tmp_path / "full")
    # 1) Resume a copy of the finished run from its step-20 snapshot (later records are dropped).
    copy = tmp_path / "copy"
    shutil.copytree(full, copy)
    resume_simulation(copy, step=20)
    # 2) A job that died after step 25 (snapshot at 20, records up to 25) resumes from its latest snapshot.
    crashed = run_simulation(config, tmp_path / "crashed", stop_after=25)
    assert read_run(crashed).meta["status"] == "running"
    resume_simulation(crashed)
    for other in (copy, crashed):
        for name in ("steps.jsonl", "eval.jsonl"):
            assert (other / name).read_bytes() == (full / name).read_bytes(), (other, name)
        assert load_snapshot(other, 40)[1]["learner"]["shared"] == load_snapshot(full, 40)[1]["learner"]["shared"]
        assert read_run(other).meta["status"] == "finished"


def test_same_seed_same_run_different_seed_different_run() -> None:
    a, b, c = (trajectory(small("joint", seed=s))[0] for s in (3, 3, 4))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_run_directory_is_complete(tmp_path: Path) -> None:
    path = write_tiny_run(tmp_path / "tiny", steps=30, seed=1)
    run = read_run(path)
    assert run.meta["status"] == "finished" and run.meta["producer"] == "gdro-lab simulator"
    assert run.num_bins == 10 and run.config["method"] == "joint"
    np.testing.assert_array_equal(run.steps, np.arange(1, 31))
    for field in ("count", "share", "weight", "multiplier", "rollouts", "reward", "success", "signal", "sigma",
                  "score"):
        assert run.bins[field].shape == (30, 10), field
    for name in ("mean_success", "mu", "lead_lag_gap", "se_reduction_pct", "effective_support", "total_rollouts",
                 "sim/se_true_reduction_pct", "prompt_gdro/effective_support", "rollout/mu"):
        assert name in run.scalars, name
    assert [e["step"] for e in run.evals] == [0, 5, 10, 15, 20, 25, 30]
    metrics = run.evals[-1]["metrics"]
    for name in ("accuracy", "worst_group_accuracy", "pass@8", "effective_support", "active_groups"):
        assert 0 <= metrics[name] <= (100 if "support" in name or "groups" in name else 1), name
    assert run.snapshot_steps == [10, 20, 30]
    state = load_snapshot(path)[1]
    assert set(state) >= {"classifier", "weighter", "allocator", "learner", "sampler", "rollout_rng"}
    with pytest.raises(Exception, match="already holds a run"):
        write_tiny_run(path)


class OneTooMany:
    """An allocator that plans one rollout over the budget."""

    def __init__(self, inner):
        self.config = inner.config

    def plan(self, bins_P, prompt_ids=None):
        counts = np.full(len(bins_P), self.config.n_bar, np.int64)
        counts[0] += 1
        return counts


def test_a_plan_off_the_budget_stops_the_run_with_the_method_steps_one_message() -> None:
    """The simulator's plan goes through gdro_lab.step.MethodStep: an allocator off the budget stops
    the run with its one-line message (the one gdro train and the verl plugin give) and a failed run."""
    sim = Simulation(small("rollout_gdro"))
    sim.method_step.allocator = OneTooMany(sim.allocator)
    with pytest.raises(ConfigError, match=r"^allocator 'gdro' planned 193 rollouts in \[4, 5\] for 48 prompts, "
                                          r"not 192 in \[2, 12\] .*every step must spend exactly the budget$"):
        sim.step()


def test_bad_sim_config() -> None:
    with pytest.raises(ConfigError, match="method"):
        SimConfig(method="nope")
    with pytest.raises(ConfigError, match="batch"):
        SimConfig(batch=10_000, world=SMALL)


ARENA = ("gdro_prompt", "knapsack", "knapsack_code", "vip", "duet", "cero", "prompt_oracle", "prompt_bayes", "prompt_stale",
         "dynamic_sampling", "greso")


@pytest.mark.parametrize("method", ARENA)
def test_arena_methods_spend_the_exact_budget_every_step(tmp_path: Path, method: str) -> None:
    run = read_run(run_simulation(small(method, steps=40), tmp_path / method))
    np.testing.assert_array_equal(run.scalars["total_rollouts"], 48 * 4)
    np.testing.assert_array_equal(run.scalars["compute/rollouts_generated"], 48 * 4)
    trained = run.scalars["compute/rollouts_trained"]
    if method in ("dynamic_sampling", "greso"):
        assert np.all(trained <= 48 * 4) and np.any(trained < 48 * 4)
        assert run.evals[-1]["metrics"]["rollouts_trained_total"] < run.evals[-1]["metrics"]["rollouts_total"]
    else:
        np.testing.assert_array_equal(trained, 48 * 4)
    oracle = run.scalars["sim/prompt_oracle_var_reduction_pct"]
    mine = run.scalars["sim/prompt_var_reduction_pct"]
    ok = np.isfinite(oracle) & np.isfinite(mine)
    assert np.all(mine[ok] <= oracle[ok] + 1e-9)  # nothing beats the oracle on Eq. 28
    if method == "prompt_oracle":
        np.testing.assert_allclose(mine[ok], oracle[ok])


@pytest.mark.parametrize("method", ["gdro_prompt", "greso"])
def test_arena_methods_resume_bit_identically(tmp_path: Path, method: str) -> None:
    config = small(method, steps=30, snapshot_every=10)
    full = run_simulation(config, tmp_path / "full")
    crashed = run_simulation(config, tmp_path / "crashed", stop_after=15)
    resume_simulation(crashed)
    for name in ("steps.jsonl", "eval.jsonl"):
        assert (crashed / name).read_bytes() == (full / name).read_bytes(), name


def test_greso_skips_before_rollout_and_dapo_trains_on_mixed_groups_only() -> None:
    sim = Simulation(small("greso", steps=60, selector={"p_easy": 0.05, "p_hard": 0.05}))
    skipped = 0.0
    for _ in range(60):
        scalars, _ = sim.step()
        skipped += scalars["select/skipped"]
        assert scalars["compute/prompts_trained"] == pytest.approx(48 * (1 - scalars["zero_variance_frac"]))
    assert skipped > 0


@pytest.mark.parametrize("method", ["prompt_gdro", "class_gdro", "joint"])
def test_only_a_method_on_the_latent_groups_gets_them(monkeypatch: pytest.MonkeyPatch, method: str) -> None:
    """The weighter's partition is the latent groups only for a method that asks for it (class_gdro): its
    weighter sees each prompt's world group, and its multipliers are per group; every other method's weighter
    sees the classifier's difficulty bins of the plan."""
    from gdro_lab.controllers.prompt_gdro import PromptGDRO
    from gdro_lab.step import MethodStep

    plans: list[np.ndarray] = []
    seen: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    plan, update = MethodStep.plan, PromptGDRO.update

    def spy_plan(step, ids):
        out = plan(step, ids)
        plans.append(out.bins_P.copy())
        return out

    def spy_update(weighter, feedback):
        seen.append((np.asarray(feedback.prompt_ids).copy(), feedback.bins_P.copy(), plans[-1]))
        return update(weighter, feedback)

    monkeypatch.setattr(MethodStep, "plan", spy_plan)
    monkeypatch.setattr(PromptGDRO, "update", spy_update)
    sim = Simulation(small(method, steps=12))
    for _ in range(12):
        sim.step()
    assert len(seen) == 12
    groups = method in GROUP_METHODS
    assert groups == (method == "class_gdro")
    for ids, bins, planned in seen:
        expected = sim.world.group_P[ids] if groups else planned
        np.testing.assert_array_equal(bins, expected)
    differ = [not np.array_equal(sim.world.group_P[ids], planned) for ids, _, planned in seen]
    assert any(differ)  # the two partitions differ in these steps, so the test can tell them apart
