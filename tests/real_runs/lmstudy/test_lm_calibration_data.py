"""gdro study lm --calibration-data: the warm start's training-pool samples and a GRPO lr sweep, as plain files
that gdro calibrate reads (read here through its own readers, which import nothing of real_runs)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from gdro_lab.runformat.runlog import read_run
from real_runs.lmstudy import calibration_data, learning_study, tasks
from real_runs.lmstudy.warmstart import WarmStartConfig

pytestmark = pytest.mark.slow


def test_calibration_data_is_what_gdro_calibrate_reads(tmp_path, monkeypatch):
    from simulators.calibrate.observe import read_samples, read_sweep

    monkeypatch.setenv("GDRO_LMSTUDY_CACHE", str(tmp_path / "cache"))
    # 4 held-out problems per group, the fewest that leave every skill in both halves (validation, test): the
    # sweep evaluates at every step, and more held-out problems only cost time
    warm = WarmStartConfig(steps=8, batch_size=16, warmup_steps=2, heldout_per_group=4, slip_rate=0.3)
    cfg = dataclasses.replace(learning_study.QUICK, warm=warm, train_size=24, prompts_per_step=8,
                              heldout_per_group=4)
    summary = calibration_data.calibration_data(cfg, tmp_path / "cal", lrs=(1e-4, 1e-3), steps=3, log=lambda _: None)
    pool = tasks.train_split(cfg.task_config())
    data = read_samples([tmp_path / "cal" / "warmstart-eval"])
    assert data.group_P.size == len(pool) and np.all(data.samples_P == calibration_data.SAMPLES_K)
    assert set(data.group_names) == {p.group for p in pool}
    config = json.loads((tmp_path / "cal" / "warmstart-eval" / "config.json").read_text())
    assert config["eval"]["temperature"] == 1.0 and config["eval"]["top_k"] == 0  # the training sampling
    sweep = read_sweep([tmp_path / "cal" / "sweep" / calibration_data.lr_name(lr) for lr in (1e-4, 1e-3)],
                       data.group_names)
    np.testing.assert_allclose(sweep.lrs, [1e-4, 1e-3])
    assert sweep.group_names == data.group_names and sweep.steps == 3 and sweep.batch == 8
    assert all(read_run(path).meta["status"] == "finished" for path in summary["sweep"])
    again = calibration_data.calibration_data(cfg, tmp_path / "cal", lrs=(1e-4, 1e-3), steps=3, log=lambda _: None)
    assert again["sweep"] == summary["sweep"]  # finished pieces are reused
