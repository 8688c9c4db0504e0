"""`gdro train` with ``rollout.engine=vllm`` on vLLM's CPU build: the real engine in the loop.

Runs in the vLLM environment (.ci/setup-vllm; skipped elsewhere). One engine serves every run of
the session (``vllm_cpu_engine``): the trainer pushes the policy's weights when a run opens and
after every update, so a run never samples from another run's weights.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gdro_lab.runformat.runlog import read_run  # noqa: E402
from real_runs import train  # noqa: E402
from real_runs.config import load_config  # noqa: E402

STEPS = 5
TIMING = ("time/", "perf/", "engine/seconds", "engine/tokens_per_s")


def vllm_config(out: Path, *overrides: str):
    # lr 1e-2: a step moves the log-probs by far more than the engine gap tolerated below, so a
    # generation from stale weights cannot pass for a synced one
    return load_config("tiny-cpu-vllm", [f"train.out={json.dumps(str(out))}", "train.progress=false",
                                         f"train.steps={STEPS}", "eval.every=0", "optim.lr=1e-2", *overrides])


def non_timing(run_dir: Path, steps: list[int]) -> dict[str, np.ndarray]:
    run = read_run(run_dir)
    rows = np.isin(run.steps, steps)
    return {k: v[rows] for k, v in run.scalars.items() if not k.startswith(TIMING)}


@pytest.mark.slow
@pytest.mark.parametrize("method", ["rollout_gdro", "prompt_gdro"])
def test_gdro_trains_on_vllm_with_the_policys_weights_every_step(method, vllm_cpu_engine, fixture_data, tmp_path):
    before = {k: v.clone() for k, v in vllm_cpu_engine.test_model.state_dict().items()}
    run_dir = train.main(vllm_config(tmp_path, f"method.name={method}"), engine=vllm_cpu_engine)
    run = read_run(run_dir)
    assert run.meta["status"] == "finished" and run.steps.tolist() == list(range(1, STEPS + 1))
    np.testing.assert_array_equal(run.scalars["total_rollouts"], 16)  # P x n_bar, exactly, every step
    # the trainer's recomputed log-probs equal vLLM's at every step: vLLM sampled from the weights
    # the trainer held (after each update and the first step's push)
    assert np.all(run.scalars["actor/engine_logprob_gap_max"] < 1e-4), run.scalars["actor/engine_logprob_gap_max"]
    rollouts = run.bins["rollouts"]
    multipliers = run.bins["multiplier"]
    if method == "rollout_gdro":  # a ragged plan within the arms at the fixed budget
        ragged = [np.unique(r[np.isfinite(r)]).size > 1 for r in rollouts]
        assert any(ragged), rollouts
        assert np.nanmin(rollouts) >= 2 and np.nanmax(rollouts) <= 8
    else:  # Prompt-GDRO moves the advantage multipliers off 1
        assert np.nanmax(np.abs(multipliers - 1.0)) > 1e-3, multipliers
    # the run trained its own policy: the engine's reference model (the fixture's) is untouched
    assert all(torch.equal(before[k], v) for k, v in vllm_cpu_engine.test_model.state_dict().items())


@pytest.mark.slow
def test_a_resumed_vllm_run_continues_as_the_uninterrupted_run(vllm_cpu_engine, fixture_data, tmp_path):
    """Stopped after step 2, then another run moves the shared engine's weights on, then resume:
    steps 3-5 equal the uninterrupted run's in every non-timing value (the resume pushes the
    checkpoint's weights into the engine; without that, step 3 samples from the other run's)."""
    stopped = train.main(vllm_config(tmp_path / "b", "method.name=joint"), engine=vllm_cpu_engine, stop_after=2)
    whole = train.main(vllm_config(tmp_path / "a", "method.name=joint"), engine=vllm_cpu_engine)
    resumed = train.main(None, resume=str(stopped), engine=vllm_cpu_engine)
    assert read_run(resumed).steps.tolist() == list(range(1, STEPS + 1))
    expected, got = non_timing(whole, [3, 4, 5]), non_timing(resumed, [3, 4, 5])
    assert expected.keys() == got.keys()
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)


@pytest.mark.slow
def test_gdro_train_cli_runs_the_vllm_preset(fixture_data, tmp_path):
    """The command the docs give, in a process of its own (its own engine)."""
    pytest.importorskip("vllm")
    env = {**os.environ, "GDRO_DATA": str(fixture_data), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "gdro_cli.main", "train", "tiny-cpu-vllm", "method.name=rollout_gdro",
                           "train.steps=3", "eval.every=3", "--out", str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    run = read_run(tmp_path / "rollout_gdro-tiny-vllm-s0")
    assert run.meta["status"] == "finished" and run.steps.tolist() == [1, 2, 3]
    assert run.config["rollout"]["engine"] == "vllm"
    assert np.all(run.scalars["actor/engine_logprob_gap_max"] < 1e-4)
    assert (tmp_path / "rollout_gdro-tiny-vllm-s0" / "eval.jsonl").read_text().strip()
