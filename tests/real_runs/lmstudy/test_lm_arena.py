"""The LM study's arena: every arena method through the real trainer (quick setting), the exact
budget every step, the summary the arena report embeds, and reuse of finished runs."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from gdro_lab.runformat.runlog import read_run
from real_runs.lmstudy import lm_arena
from studykit.arena_settings import METHOD_SETTINGS

pytestmark = pytest.mark.slow


def test_quick_lm_arena_end_to_end(tmp_path, monkeypatch, quick_config, quick_warm_cache):
    monkeypatch.setenv("GDRO_LMSTUDY_CACHE", str(quick_warm_cache))  # seed 0's warm start, trained once
    monkeypatch.setattr(lm_arena, "QUICK", dataclasses.replace(quick_config, seeds=1, steps=4, eval_every=4))
    monkeypatch.setattr(lm_arena, "LR_SCALES", (1.0,))
    path = lm_arena.main_arena(tmp_path, quick=True, jobs=2, log=lambda _: None)
    summary = json.loads(path.read_text())
    assert set(summary["gains"]) == set(lm_arena.METHODS) and summary["decision"][0].startswith("arena decision (LM")
    assert any("Knapsack-RL" in line for line in summary["markdown"])
    runs = sorted((tmp_path / "lm" / "runs").iterdir())
    assert len(runs) == len(lm_arena.METHODS)
    budget = lm_arena.QUICK.prompts_per_step * lm_arena.QUICK.n_bar
    for run_dir in runs:
        run = read_run(run_dir)
        method = run.config["train"]["run_name"].split("-lr")[0]
        np.testing.assert_array_equal(run.scalars["compute/rollouts_generated"], budget)
        if method in METHOD_SETTINGS:  # early stopping: the controllers count the scored rollouts
            scored = run.scalars["compute/rollouts_generated"] - run.scalars["compute/rollouts_aborted"]
            assert np.all(run.scalars["total_rollouts"] <= scored)
        else:
            np.testing.assert_array_equal(run.scalars["total_rollouts"], budget)
        assert "lmstudy_add/test/mean@8" in run.evals[-1]["metrics"]
        expected = lm_arena.METHODS[method][1]
        for key, value in expected.items():
            assert run.config["method"][key] == value
        settings = METHOD_SETTINGS.get(method, {})  # DUET's early stopping, as in the simulator's arena
        assert {k: run.config["rollout"][k] for k in settings} == settings
        assert ("compute/rollouts_aborted" in run.scalars) == bool(settings)
    stamps = {p: (p / "steps.jsonl").stat().st_mtime_ns for p in runs}
    lm_arena.main_arena(tmp_path, quick=True, jobs=2, log=lambda _: None)
    assert {p: (p / "steps.jsonl").stat().st_mtime_ns for p in runs} == stamps  # finished runs reused
