"""A run summary by value: the summary read back from a run folder (``simulators.parallel.summarize``, what the
studies' ``--report-only`` and the prediction's reruns read) carries the same per-step and per-bin arrays as
the summary kept in memory while the run was written, and a bin's prompt counts add up to the batch (a
sampled mutant that read the folder back without its per-bin arrays survived the package's tests)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simulators.calibrate import predict
from simulators.parallel import SUMMARY_BINS, run_jobs, summarize


def test_a_summary_read_back_from_its_folder_has_the_per_bin_arrays_kept_in_memory(tmp_path: Path) -> None:
    settings = predict.Settings(draws=1, seeds=1, steps=12, batch=8, lr_scale=1.0, optimizer="sgd", workers=1,
                                out=tmp_path)
    config = predict.sim_config(settings, {"num_prompts": 64, "num_groups": 2}, "rollout_gdro", 0, 1.0)
    [in_memory] = run_jobs([(config, tmp_path / "run", False)], workers=1, progress=False)
    read_back = summarize(tmp_path / "run")
    assert sorted(in_memory.bins) == sorted(SUMMARY_BINS) and sorted(read_back.bins) == sorted(SUMMARY_BINS)
    for name in SUMMARY_BINS:
        np.testing.assert_array_equal(read_back.bins[name], in_memory.bins[name], err_msg=name)
    # 64 prompts in batches of 8: the first epoch (8 steps) has no bins yet; after it every prompt is in one
    counts_step_bin = read_back.bins["count"]
    assert counts_step_bin.shape[0] == 12
    for step in range(8, 12):
        assert sum(float(c) for c in counts_step_bin[step]) == 8
