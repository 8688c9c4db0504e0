"""The response-length model: its mean and shape against Monte Carlo, the default's direction, a stream of
its own (the run is the same with lengths), resume, and compute/tokens_* as the sum of the drawn lengths."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

from gdro_lab import read_run
from simulators import loop
from simulators.loop import Simulation, resume_simulation, run_simulation
from simulators.simulator_config import SimConfig
from simulators.world import WorldConfig, length_log_mu, mean_length, sample_lengths

LONG = WorldConfig(num_prompts=600, num_groups=8, lengths=True, length_log_mean=6.0, length_hardness=1.0,
                   length_failure=0.5, length_log_sd=0.5, max_new_tokens=1500)


def draw(config: WorldConfig, p: float, success: bool, size: int = 200_000) -> np.ndarray:
    rng = np.random.default_rng(0)
    return sample_lengths(rng, np.array([p]), np.array([size]), np.full(size, success), config)


@pytest.mark.parametrize("cap", [1500, 10**6])
@pytest.mark.parametrize("p,success", [(0.9, True), (0.2, False), (0.5, True)])
def test_mean_and_shape_match_monte_carlo(cap: int, p: float, success: bool) -> None:
    config = replace(LONG, max_new_tokens=cap)
    tokens = draw(config, p, success)
    mu = float(length_log_mu(config, np.array(p), np.array(success)))
    assert tokens.mean() == pytest.approx(float(mean_length(config, np.array(p), np.array(success))), rel=5e-3)
    assert np.mean(tokens >= cap) == pytest.approx(norm.sf((np.log(cap - 0.5) - mu) / 0.5), abs=3e-3)
    assert np.median(tokens) == pytest.approx(np.exp(mu), rel=1e-2)  # the cap is above the median here
    if cap > 10**5:
        assert np.log(tokens).std() == pytest.approx(0.5, rel=1e-2)


def test_defaults_make_hard_prompts_longer_and_failures_about_as_long() -> None:
    """The defaults are the fit to the CPU LM study's warm start, whose responses are bare answers
    (``\\boxed{168}``): hard prompts' answers are longer, failed ones very slightly shorter (an LLM's
    reasoning differs: ``gdro calibrate`` refits these)."""
    config = WorldConfig()
    p = np.array([0.1, 0.5, 0.9])
    fail, solve = mean_length(config, p, np.zeros(3)), mean_length(config, p, np.ones(3))
    assert np.all(np.diff(fail) < 0) and np.all(np.diff(solve) < 0)
    assert solve[0] / solve[2] == pytest.approx(np.exp(0.8 * config.length_hardness), rel=1e-3)
    assert solve[0] > 1.08 * solve[2]
    assert np.all(np.abs(fail / solve - 1) < 0.03)
    hard, easy = draw(config, 0.1, False), draw(config, 0.9, False)
    assert hard.mean() > 1.05 * easy.mean() and 10 < easy.mean() < 12 and hard.max() <= config.max_new_tokens


def small(lengths: bool, **kw) -> SimConfig:
    return SimConfig(method=kw.pop("method", "rollout_gdro"), steps=kw.pop("steps", 40), batch=48, eval_every=10,
                     world=replace(LONG, lengths=lengths), **kw)


def test_lengths_draw_from_their_own_stream() -> None:
    """With lengths, every step record (less compute/tokens_*), evaluation and learner state is the same."""
    runs = []
    for lengths in (False, True):
        sim = Simulation(small(lengths, method="greso"))
        records = [sim.step() for _ in range(40)]
        runs.append(([{k: v for k, v in r[0].items() if not k.startswith("compute/tokens")} for r in records if r],
                     {k: v for k, v in sim.evaluate().items() if not k.startswith("tokens")},
                     sim.learner.prompt_skill_P.copy()))
    assert json.dumps(runs[0][:2]) == json.dumps(runs[1][:2])  # exact (repr of every float), NaN included
    np.testing.assert_array_equal(runs[0][2], runs[1][2])


def test_resume_with_lengths_is_bit_identical(tmp_path: Path) -> None:
    config = small(True, snapshot_every=10)
    full = run_simulation(config, tmp_path / "full")
    copy = tmp_path / "copy"
    shutil.copytree(full, copy)
    resume_simulation(copy, step=20)
    for name in ("steps.jsonl", "eval.jsonl"):
        assert (copy / name).read_bytes() == (full / name).read_bytes(), name
    assert "compute/tokens_generated" in (full / "steps.jsonl").read_text()


def test_logged_tokens_are_the_drawn_lengths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[np.ndarray] = []

    def spy(*args: object) -> np.ndarray:
        drawn.append(sample_lengths(*args))  # type: ignore[arg-type]
        return drawn[-1]

    monkeypatch.setattr(loop, "sample_lengths", spy)
    run = read_run(run_simulation(small(True, method="greso", steps=20, log_every=1), tmp_path / "run"))
    generated = np.array([d.sum() for d in drawn], float)
    np.testing.assert_array_equal(run.scalars["compute/tokens_generated"], generated)
    trained = run.scalars["compute/tokens_trained"]
    assert np.all(trained <= generated) and np.any(trained < generated)  # DAPO's filter drops some groups
    evals = [json.loads(line)["metrics"] for line in (tmp_path / "run" / "eval.jsonl").read_text().splitlines()]
    assert [e["tokens_total"] for e in evals] == [0.0, generated[:10].sum(), generated.sum()]
    assert evals[-1]["tokens_trained_total"] == trained.sum()
