"""Study driver: trainer configs per method, the step-size match, settings and CLI errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gdro_lab.runlog import RunWriter
from real_runs.lmstudy import study
from real_runs.lmstudy.cli import main as cli_main


def test_trainer_configs_differ_only_where_the_method_says(tmp_path):
    configs = {m: study.trainer_config(study.DEFAULT, m, 1, tmp_path, 1.25 if m == "grpo_matched" else 1.0)
               for m in study.METHODS}
    names = {m: c.method.controller_names()[1:] for m, c in configs.items()}
    assert names == {"grpo": ("uniform", "uniform"), "grpo_matched": ("uniform", "uniform"),
                     "prompt_gdro": ("gdro", "uniform"), "rollout_gdro": ("uniform", "gdro"),
                     "joint": ("gdro", "gdro")}
    assert configs["grpo_matched"].optim.lr_scale == 1.25 and configs["grpo"].optim.lr_scale == 1.0
    for c in configs.values():  # same rollout budget, data order seed and evaluation everywhere
        assert (c.method.n_bar, c.method.n_min, c.method.n_max) == (4, 2, 12)
        assert c.train.seed == 1 and c.eval.k == 8 and c.optim.lr == study.DEFAULT.lr
        assert c.train.prompts_per_step == study.DEFAULT.prompts_per_step
        assert c.train.mini_batches == study.DEFAULT.mini_batches
    assert len({c.train.run_name for c in configs.values()}) == len(study.METHODS)


def test_mean_multiplier_is_the_prompt_weighted_mean(tmp_path):
    path = tmp_path / "pg"
    writer = RunWriter(path, {}, num_bins=3, producer="test")
    # two unassigned prompts keep multiplier 1: (4 + 3 + 4 + 2) / 12; a bin without prompts has none
    writer.log_step(0, {"num_prompts": 12, "num_unassigned": 2},
                    {"count": [2, 3, 5], "multiplier": [2.0, 1.0, 0.8]})
    writer.log_step(1, {"num_prompts": 8, "num_unassigned": 0},
                    {"count": [0, 4, 4], "multiplier": [None, 1.5, 1.0]})  # 10 / 8
    writer.close()
    assert study.mean_multiplier(path) == pytest.approx((13 / 12 + 10 / 8) / 2)
    bare = tmp_path / "bare"
    writer = RunWriter(bare, {}, num_bins=3, producer="test")
    writer.log_step(0, {}, {"count": [1, 1, 1]})
    writer.close()
    with pytest.raises(ValueError, match="multiplier"):
        study.mean_multiplier(bare)


def test_bad_settings_are_clear_errors(capsys):
    with pytest.raises(ValueError, match="seeds"):
        study.StudyConfig(seeds=0)
    with pytest.raises(ValueError, match="n_min <= n_bar"):
        study.StudyConfig(n_bar=20)
    with pytest.raises(ValueError, match="warm start's"):  # a held-out split the warm start trained on
        study.StudyConfig(heldout_per_group=200)
    with pytest.raises(ValueError, match="mini_batches"):
        study.StudyConfig(mini_batches=0)
    with pytest.raises(SystemExit):
        cli_main(["lm", "--seeds", "0"])
    assert "positive integer" in capsys.readouterr().err


def test_cli_is_registered():
    from gdro_cli.main import COMMANDS

    assert COMMANDS["study"][:2] == ("real_runs.lmstudy.cli", "main")


def test_cli_slip_rate_reaches_the_warm_start_and_bad_rates_are_refused(monkeypatch, capsys, tmp_path):
    seen = {}

    def fake(cfg, out, report_dir, setting="default", report_only=False):
        seen["cfg"], seen["setting"] = cfg, setting
        return tmp_path / "report.md"

    monkeypatch.setattr(study, "study_and_report", fake)
    assert cli_main(["lm", "--small", "--slip-rate", "0", "--out", str(tmp_path)]) == 0
    assert seen["cfg"].warm.slip_rate == 0.0 and seen["setting"] == "small"
    assert seen["cfg"].warm.key() != study.SMALL.warm.key()  # another warm start, built and cached apart
    assert cli_main(["lm", "--out", str(tmp_path)]) == 0
    assert seen["cfg"].warm.slip_rate == study.DEFAULT.warm.slip_rate
    for bad in ("1.0", "-0.1", "x"):
        with pytest.raises(SystemExit):
            cli_main(["lm", "--slip-rate", bad])
        assert "[0, 1)" in capsys.readouterr().err
