"""End to end: a quick study runs every method through the real trainer and writes its report."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from gdro_lab.runformat.runlog import read_run
from real_runs.lmstudy import learning_study, pipeline
from real_runs.lmstudy.study_plan import finished_study
from real_runs.lmstudy.warmstart import load_warm_start

pytestmark = pytest.mark.slow


def test_quick_study_end_to_end(tmp_path, monkeypatch, quick_config, quick_warm_cache):
    monkeypatch.setenv("GDRO_LMSTUDY_CACHE", str(quick_warm_cache))  # seed 0's warm start, trained once
    cfg = dataclasses.replace(quick_config, seeds=1, steps=4, lr_extend=0)
    report = pipeline.study_and_report(cfg, tmp_path / "study", tmp_path / "report", setting="quick",
                                    log=lambda _: None)
    result = finished_study(cfg, tmp_path / "study")
    assert result["complete_seeds"] == [0]
    warm_model, _, _ = load_warm_start(result["warm_paths"][0])
    warm_state = warm_model.state_dict()
    budget = cfg.prompts_per_step * cfg.n_bar
    for method in learning_study.METHODS:
        path = result["runs"][method][0]
        run = read_run(path)
        assert run.meta["status"] == "finished" and list(run.steps) == [1, 2, 3, 4]
        np.testing.assert_array_equal(run.scalars["total_rollouts"], budget)  # exact every step
        np.testing.assert_array_equal(run.scalars["mean_rollouts"], cfg.n_bar)
        assert [e["step"] for e in run.evals] == [2, 4]
        assert {"lmstudy_val_mod/pass@8", "lmstudy_test_mod/pass@8"} <= set(run.evals[-1]["metrics"])
        assert "multiplier_sq_mean" in run.scalars
        config = json.loads((path / "config.json").read_text())
        assert config["method"]["name"] == (method if method in ("prompt_gdro", "rollout_gdro", "joint") else "grpo")
        from real_runs.checkpoint import read_model_state   # checkpoints are Hugging Face folders
        trained = read_model_state(path / "checkpoints" / f"step_{cfg.steps:08d}")
        assert any(k in trained and not torch.equal(trained[k], v) for k, v in warm_state.items()), f"{method}: no change"
    from studykit.stepmatch import match_factors
    factors = match_factors([read_run(result["runs"]["prompt_gdro"][0]).scalars])
    for name, kind in learning_study.MATCHED.items():
        matched = json.loads((result["runs"][name][0] / "config.json").read_text())
        if abs(getattr(factors, kind) - 1) > 0.02:  # else GRPO's own run stands in
            assert matched["loss"]["adv_scale"] == pytest.approx(getattr(factors, kind), abs=1e-4)
            assert matched["optim"]["lr_scale"] == 1.0
            assert matched["matched_to"] == "prompt_gdro" and matched["match"] == f"{kind}_moment"  # the app's name
        else:
            assert "matched_to" not in matched  # GRPO's own run is not relabelled
    assert sorted(result["grid"]) == [0.707106781187, 1.0, 1.41421356237]  # lr_extend 0: the start only
    text = report.read_text()
    assert "QUICK setting" in text and "warm starts (step 0)" in text
    for label in ("GRPO, step-matched E[m]", "step-matched √E[m²]", "tuned GRPO", "Prompt-GDRO", "Rollout-GDRO",
                  "joint", "**untested**"):
        assert label in text
    assert (tmp_path / "report" / "fig_traveling_wave.png").is_file()
    # the slip diagnostic measured the warm start and every run's final checkpoint
    measured = json.loads((tmp_path / "report" / "slips.json").read_text())
    assert set(measured["runs"]) == set(learning_study.METHODS) and set(measured["warm"]["0"]) == set(learning_study.tasks.SKILLS)
    assert all(list(seeds) == ["0"] for seeds in measured["runs"].values())
    assert "right answers and the demonstrator's slips" in text
    warm = json.loads((Path(result["warm_paths"][0]) / "warmstart.json").read_text())
    assert warm["config"]["slip_rate"] == cfg.warm.slip_rate and warm["config"]["seed"] == cfg.warm.seed
    # the app reads every run directory the study wrote
    from apps.data import loading

    for method in learning_study.METHODS:
        assert loading.load_run(result["runs"][method][0]).steps.size == 4
