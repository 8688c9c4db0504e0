"""Study driver: trainer configs per method, the step-size match, settings and CLI errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gdro_lab.runformat.runlog import RunWriter
from real_runs.lmstudy import learning_study
from real_runs.lmstudy.cli import main as cli_main


def test_trainer_configs_differ_only_where_the_method_says(tmp_path):
    configs = {m: learning_study.trainer_config(learning_study.DEFAULT, m, 1, tmp_path, adv_scale=1.25 if "matched" in m else 1.0,
                                       name=m) for m in learning_study.METHODS}
    configs["grpo_lr2"] = learning_study.trainer_config(learning_study.DEFAULT, "grpo", 1, tmp_path, lr_scale=2.0, name="grpo_lr2")
    names = {m: c.method.controller_names()[1:] for m, c in configs.items()}
    uniform = ("uniform", "uniform")
    assert names == {"grpo": uniform, "grpo_matched_first": uniform, "grpo_matched_second": uniform,
                     "grpo_lr2": uniform, "prompt_gdro": ("gdro", "uniform"), "rollout_gdro": ("uniform", "gdro"),
                     "joint": ("gdro", "gdro")}
    # step matching scales the advantages (under AdamW not the same as the lr); tuning scales the lr
    assert configs["grpo_matched_second"].loss.adv_scale == 1.25 and configs["grpo_matched_second"].optim.lr_scale == 1
    assert configs["grpo_lr2"].optim.lr_scale == 2.0 and configs["grpo_lr2"].loss.adv_scale == 1.0
    assert configs["grpo"].loss.adv_scale == 1.0 and configs["grpo"].optim.lr_scale == 1.0
    for c in configs.values():  # same rollout budget, data order seed and evaluation everywhere
        assert (c.method.n_bar, c.method.n_min, c.method.n_max) == (4, 2, 12)
        assert c.train.seed == 1 and c.eval.k == 8 and c.optim.lr == learning_study.DEFAULT.lr
        assert c.train.prompts_per_step == learning_study.DEFAULT.prompts_per_step
        assert c.train.mini_batches == learning_study.DEFAULT.mini_batches
        assert sorted(c.eval.benchmarks) == sorted(f"lmstudy_{h}_{g}" for h in ("val", "test") for g in learning_study.tasks.SKILLS)
    assert len({c.train.run_name for c in configs.values()}) == len(configs)


def test_each_seed_has_its_own_warm_start():
    keys = {learning_study.warm_config(learning_study.DEFAULT, s).key() for s in range(3)}
    assert len(keys) == 3 and learning_study.warm_config(learning_study.DEFAULT, 0) == learning_study.DEFAULT.warm
    assert all(learning_study.warm_config(learning_study.DEFAULT, s).task_seed == learning_study.DEFAULT.warm.task_seed for s in range(3))


def _run(path, multipliers, val_pass1):
    """A finished run: per-step multiplier moments and one evaluation whose val pass@1 is ``val_pass1``."""
    import json
    writer = RunWriter(path, {}, num_bins=3, producer="test")
    for t, m in enumerate(multipliers):
        m = np.asarray(m, float)
        writer.log_step(t, {"multiplier_mean": float(m.mean()), "multiplier_sq_mean": float((m * m).mean())}, {})
    metrics = {f"lmstudy_{h}_{g}/{k}": val_pass1 if h == "val" else 0.5
               for h in ("val", "test") for g in learning_study.tasks.SKILLS for k in ("mean@8", "pass@8")}
    writer.log_eval(len(multipliers), metrics)
    writer.close()
    meta = json.loads((path / "meta.json").read_text())
    assert meta["status"] == "finished"
    return path


def test_plan_matches_after_prompt_gdro_and_extends_grpos_grid(tmp_path):
    from real_runs.lmstudy import study_plan as plan_mod

    cfg = learning_study.StudyConfig(seeds=2, lr_extend=1)
    logged = []
    plan = plan_mod.Plan(cfg, tmp_path, {0: tmp_path, 1: tmp_path}, log=logged.append)
    first = plan.take(100)
    names = [(t.seed, t.name) for t in first]
    assert names[:5] == [(0, "initial"), (0, "prompt_gdro"), (0, "grpo"), (0, "rollout_gdro"), (0, "joint")]
    assert {t.name for t in first} >= {"grpo_lr0.707107", "grpo_lr1.41421"} and len(first) == 2 * 7
    assert plan.take(100) == []  # nothing planned before its inputs finished
    val = {1.0: 0.3, plan_mod.START[0]: 0.2, plan_mod.START[2]: 0.4}  # the best val point is the top edge
    for task in first:
        path = tmp_path / f"{task.name}-s{task.seed}"
        mult = [[1.0, 1.0], [1.0, 3.0]] if task.name == "prompt_gdro" else [[1.0, 1.0]]
        plan.done(task, _run(path, mult, val.get(task.lr_scale, 0.0)) if task.name != "initial" else path)
    planned = plan.take(100)
    matched = {(t.name, t.seed): t.adv_scale for t in planned if "matched" in t.name}
    assert matched == {("grpo_matched_first", s): 1.5 for s in range(2)} | {
        ("grpo_matched_second", s): round(float(np.sqrt(3.0)), 4) for s in range(2)}  # E[m] = 6/4, E[m^2] = 12/4
    grown = [t for t in planned if t.name.startswith("grpo_lr")]
    assert [(t.seed, t.lr_scale) for t in grown] == [(s, 2.0) for s in range(2)]
    assert any("lr x 2" in line for line in logged) and any("1.500" in line for line in logged)
    for task in grown:  # the new top point is worse: no further extension (and lr_extend=1 caps it anyway)
        plan.done(task, _run(tmp_path / f"{task.name}-s{task.seed}", [[1.0, 1.0]], 0.1))
    assert [t for t in plan.take(100) if t.name.startswith("grpo_lr")] == []


def test_bad_settings_are_clear_errors(capsys):
    with pytest.raises(ValueError, match="seeds"):
        learning_study.StudyConfig(seeds=0)
    with pytest.raises(ValueError, match="n_min <= n_bar"):
        learning_study.StudyConfig(n_bar=20)
    with pytest.raises(ValueError, match="warm start's"):  # a held-out split the warm start trained on
        learning_study.StudyConfig(heldout_per_group=200)
    with pytest.raises(ValueError, match="mini_batches"):
        learning_study.StudyConfig(mini_batches=0)
    with pytest.raises(SystemExit):
        cli_main(["lm", "--seeds", "0"])
    assert "positive integer" in capsys.readouterr().err


def test_cli_is_registered():
    from gdro_cli.main import COMMANDS

    assert COMMANDS["study"][:2] == ("gdro_cli.study_provenance", "main")  # which runs real_runs.lmstudy.cli
    from gdro_cli import study_provenance
    assert study_provenance.ENTRY == ["real_runs.lmstudy.cli"]


def test_cli_slip_rate_reaches_the_warm_start_and_bad_rates_are_refused(monkeypatch, capsys, tmp_path):
    seen = {}

    def fake(cfg, out, report_dir, setting="default", report_only=False):
        seen["cfg"], seen["setting"] = cfg, setting
        return tmp_path / "report.md"

    from real_runs.lmstudy import pipeline
    monkeypatch.setattr(pipeline, "study_and_report", fake)
    assert cli_main(["lm", "--small", "--slip-rate", "0", "--out", str(tmp_path)]) == 0
    assert seen["cfg"].warm.slip_rate == 0.0 and seen["setting"] == "small"
    assert seen["cfg"].warm.key() != learning_study.SMALL.warm.key()  # another warm start, built and cached apart
    assert cli_main(["lm", "--out", str(tmp_path)]) == 0
    assert seen["cfg"].warm.slip_rate == learning_study.DEFAULT.warm.slip_rate
    for bad in ("1.0", "-0.1", "x"):
        with pytest.raises(SystemExit):
            cli_main(["lm", "--slip-rate", bad])
        assert "[0, 1)" in capsys.readouterr().err
