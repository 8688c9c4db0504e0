"""gdro calibrate --plan: the Fisher update, the gain's gradient, a known-world property, end to end, bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from simulators.calibrate import dynamics, next_sweep
from simulators.calibrate.cli import calibrate_main, predict_main
from simulators.calibrate.recovery import synthetic_data, truth_world, write_as_real


def test_fisher_update_is_the_gaussian_posterior() -> None:
    """y = A x + e, e ~ N(0, 1), x ~ N(0, S0): Cov(x | y) by the Schur complement of the joint covariance and by
    Monte Carlo (the residual covariance of the best linear predictor of x from y); S0 may be singular."""
    rng = np.random.default_rng(0)
    A = rng.normal(size=(7, 3))
    root = rng.normal(size=(3, 3))
    for S0 in (root @ root.T + 0.1 * np.eye(3), np.outer(root[0], root[0]) + np.outer(root[1], root[1])):
        schur = S0 - S0 @ A.T @ np.linalg.solve(A @ S0 @ A.T + np.eye(7), A @ S0)
        assert next_sweep.updated_covariance(S0, A.T @ A) == pytest.approx(schur, abs=1e-10)
    x = rng.multivariate_normal(np.zeros(3), S0, size=200_000)
    y = x @ A.T + rng.normal(size=(200_000, 7))
    beta = np.linalg.lstsq(y, x, rcond=None)[0]
    monte_carlo = np.cov((x - y @ beta).T)
    assert next_sweep.updated_covariance(S0, A.T @ A) == pytest.approx(monte_carlo, abs=0.02 * np.abs(S0).max())
    negative = -np.eye(3)  # an estimated information with a negative direction adds nothing there
    assert next_sweep.updated_covariance(S0, negative) == pytest.approx(S0)


def test_gradient_from_decided_by_in_fitting_coordinates() -> None:
    rows = [{"parameter": "lr_prompt", "values": [0.1, 1.0], "gains": [0.02, 0.05]},
            {"parameter": "transfer", "values": [0.2, 0.6], "gains": [0.0, 0.04]},
            {"parameter": "curvature", "values": [0.3, 0.3], "gains": [0.01, 0.01]},
            {"parameter": "difficulty_offset", "values": [-1.0, 1.0], "gains": [0.03, -0.01]},
            {"parameter": "prompt_difficulty_scale", "values": [0.5, 2.0], "gains": [0.0, 0.02]}]
    g = dict(zip(dynamics.PARAMS, next_sweep.sensitivity(rows, dynamics.PARAMS)))
    assert g["lr_prompt"] == pytest.approx(0.03 / math.log(10))  # log scale
    assert g["transfer"] == pytest.approx(0.1)  # linear
    assert g["curvature"] == 0.0 and g["lr_group"] == 0.0  # no width / not listed
    stage1 = ("difficulty_offset", "prompt_difficulty_scale")
    assert next_sweep.sensitivity(rows, stage1) == pytest.approx([-0.02, 0.02 / math.log(4)])
    draws = {"lr_prompt": [0.1, 1.0, 0.1, 1.0], "transfer": [0.2, 0.2, 0.6, 0.6]}
    assert next_sweep.covariance(draws, ("lr_prompt", "transfer")) == pytest.approx(
        np.diag([math.log(10) ** 2, 0.4**2]) / 3)


def _known_fit(world, lrs: list[float], steps: int) -> dict:
    from dataclasses import asdict

    from simulators.calibrate.initial_difficulty import PARAMS

    values = asdict(world)
    return {"world": values, "plan": {"lr": 1.0}, "difficulty": {"values": {k: values[k] for k in PARAMS}},
            "dynamics": {"lrs": lrs, "steps": steps, "batch": 32, "n": 4, "eval_steps": [6, 12], "groups": ["g0", "g1"],
                         "medians": {k: values[k] for k in dynamics.PARAMS}}}


def test_a_high_lr_arm_informs_the_price_of_a_step_more_than_a_low_lr_arm() -> None:
    """The price of a step grows with the step's square: the curves at x8 the largest lr say more about it than
    those at 1/4 the smallest (same prior, same steps)."""
    world = truth_world("middle", num_prompts=160, num_groups=2, seed=0)
    fit = _known_fit(world, [0.5, 1.0, 2.0], 12)
    sigma0 = np.eye(len(dynamics.PARAMS))
    curvature = dynamics.PARAMS.index("curvature")
    after = {lr: next_sweep.updated_covariance(sigma0, next_sweep.extra_information(fit, [lr], 12))[curvature, curvature]
             for lr in (16.0, 0.125)}
    assert after[16.0] < after[0.125] < 1.0


@pytest.fixture(scope="module")
def predicted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    truth = truth_world("middle", num_prompts=160, num_groups=2, seed=0)
    sample, sweep = synthetic_data(truth, lrs=(0.5, 1.0, 2.0), batch=16, n=4, steps=12, eval_every=6, k=8, seed=0)
    samples, runs = write_as_real(sample, sweep, tmp_path_factory.mktemp("real"), k=8)
    out = tmp_path_factory.mktemp("cal")
    assert calibrate_main(["--samples", str(samples), "--sweep", *map(str, runs), "--lr", "1", "--out", str(out),
                           "--boots", "6", "--pilot", "8", "--steps", "12", "--optimizer", "sgd"]) == 0
    assert predict_main([str(out / "world.toml"), "--draws", "3", "--seeds", "1", "--steps", "10", "--workers", "1"]) == 0
    return out


def test_plan_end_to_end(predicted: Path, capsys: pytest.CaptureFixture) -> None:
    summary_path = predicted / "predict" / "summary.json"
    summary = json.loads(summary_path.read_text())
    summary["methods"]["prompt_gdro"]["test/accuracy"]["vs_tuned"]["median"] = 0.01  # at the threshold: never sharp
    summary_path.write_text(json.dumps(summary))
    capsys.readouterr()
    assert calibrate_main(["--plan", str(predicted)]) == 0
    out = capsys.readouterr().out
    print(out)
    lines = out.strip().splitlines()
    assert len(lines) <= 20 and lines[-1].startswith("plan: ") and "sharp now: no" in lines[0]
    result = json.loads((predicted / "plan.json").read_text())
    costs = [c["rollouts"] for c in result["candidates"]]
    assert len(costs) == 9 and costs == sorted(costs) and costs[0] == 12 * 16 * 4 and costs[-1] == 3 * 24 * 16 * 4
    assert all(c["sd"] <= result["sd"] + 1e-12 and c["sd"] >= result["floor_sd"] - 1e-12 for c in result["candidates"])
    entry = summary["methods"]["prompt_gdro"]["test/accuracy"]["vs_tuned"]  # the sd starts at the drawn worlds' own
    assert result["sd"] == pytest.approx((entry["hi"] - entry["lo"]) / 3.92)
    assert result["anchor"] == pytest.approx(result["sd"] / result["linearised_sd"])
    pick = next(c for c in result["candidates"] if c["label"] == result["pick"])
    assert pick == max(result["candidates"], key=lambda c: (result["sd"] - c["sd"]) / c["rollouts"])
    assert f"optim.lr=$lr train.steps={pick['steps']} eval.every=6" in out and "for lr in " in out
    assert "runs/plan-lr" in result["command"][1] and result["command"][1].startswith("gdro calibrate --samples")
    assert "Laplace" in (predicted / "plan.md").read_text()


def test_bad_plan_input_is_one_line(predicted: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    def error(args: list[str]) -> str:
        assert calibrate_main(args) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.startswith("gdro calibrate: error:")
        return err

    assert "no fit.json" in error(["--plan", str(tmp_path)])
    fit = json.loads((predicted / "fit.json").read_text())
    (tmp_path / "fit.json").write_text(json.dumps(fit))
    assert f"run gdro predict {tmp_path / 'world.toml'} first" in error(["--plan", str(tmp_path)])
    (tmp_path / "predict").mkdir()
    (tmp_path / "predict" / "summary.json").write_text((predicted / "predict" / "summary.json").read_text())
    assert "--method nope: not in" in error(["--plan", str(tmp_path), "--method", "nope"])
    (tmp_path / "fit.json").write_text(json.dumps({**fit, "dynamics": None}))
    assert "no sweep was fitted" in error(["--plan", str(tmp_path)])
    (tmp_path / "fit.json").write_text("{")
    assert "not valid JSON" in error(["--plan", str(tmp_path)])
    assert "required: --samples" in error(["--out", str(tmp_path)])
