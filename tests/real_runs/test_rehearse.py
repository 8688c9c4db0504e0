"""`gdro train paper-qwen3-1.7b --rehearse`: the paper preset's whole path on CPU, end to end (issue 20.3).

The rehearsal changes only the model (a shrunk Qwen3), the lengths, the per-benchmark evaluation
limit and bf16 autocast on CPU (real_runs/rehearse.py), starts the controllers from a seeded
history (so both steps plan with assigned bins), runs step 1, stops with a checkpoint, resumes for
step 2 with the preset's evaluation, and checks what ran, the GDRO path per method included; a
failure is exit 2.
Measured: see docs/benchmarks.md ("Rehearsal of the paper presets").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from real_runs import train_cli  # noqa: E402
from real_runs.config import load_config  # noqa: E402
from real_runs.data import BENCHMARKS, data_root  # noqa: E402
from real_runs.rehearse import SHRINK, config_diff, rehearsal_config  # noqa: E402


def _check_data() -> None:
    """Full ../shared/data, or the small fixture copy a clone alone uses (tests/fixtures/data: its
    64 DAPO rows leave 5 prompts under the rehearsal's 96 tokens, which recur within a step)."""
    root = data_root()
    needed = [BENCHMARKS[name].files["test"] for name in load_config("paper-qwen3-1.7b").eval.benchmarks]
    missing = [f for f in ["dapo_math_17k/dapo_math_17k.parquet", *needed] if not (root / f).exists()]
    if missing:
        pytest.skip(f"data folder {root} lacks {missing[0]}: set GDRO_DATA (or add the test fixtures)")


@pytest.mark.parametrize("preset", ["paper-qwen3-1.7b", "paper-qwen3-4b", "paper-qwen3-8b"])
def test_the_rehearsal_changes_only_the_model_the_lengths_and_the_eval_limit(preset: str):
    real = load_config(preset, ["method.name=joint"])
    diff = config_diff(real, rehearsal_config(real, preset))
    allowed = {f"{s}.{k}" for s, values in SHRINK.items() for k in values} | {"model.autocast", "train.run_name"}
    assert set(diff) == allowed
    assert diff["model.autocast"] == ("auto", "bf16") and diff["train.steps"] == (1000, 2)
    kept = config_diff(real, rehearsal_config(real, preset, keep=["rollout.max_prompt_tokens"]))
    assert "rollout.max_prompt_tokens" not in kept


@pytest.mark.slow
def test_paper_qwen3_1_7b_rehearses_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    _check_data()
    assert train_cli.main(["paper-qwen3-1.7b", "--rehearse", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for needle in ("model.name: 'Qwen/Qwen3-1.7B-Base' -> 'tiny-rehearsal'", "1,720,574,976 parameters",
                   "projected GPU memory", "peak = static + max(update, generation)", "H200 141 GB",
                   "80 GB card", "| step | plan | generate |", "trainer overhead", "verified: steps 1..2",
                   "1024 rollouts per step", "4 optimizer steps (2 mini-batches per step)",
                   "7 benchmarks scored at k=8", "rehearsal: seeded history: 50 synthetic steps of 256 prompts",
                   "GDRO path, step 1:", "GDRO path, step 2:", "rehearsal passed"):
        assert needle in out, needle
    run_dir = tmp_path / "rehearsal-paper-qwen3-1.7b-grpo"
    assert (run_dir / "checkpoints" / "step_00000002" / "model.safetensors").exists()


def test_a_failure_in_the_path_is_one_line_and_exit_2(tmp_path: Path, monkeypatch, capsys):
    from real_runs import data

    def broken(cfg):
        raise ValueError("data.train='dapo': the parquet file is truncated")

    monkeypatch.setattr(data, "load_train_records", broken)
    assert train_cli.main(["paper-qwen3-1.7b", "--rehearse", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "gdro train: data.train='dapo': the parquet file is truncated"


def test_verify_refuses_a_run_that_did_not_follow_the_preset(tmp_path: Path):
    """A run whose budget or evaluation differs from the preset's is a RehearsalError."""
    import numpy as np

    from gdro_lab.runformat.runlog import RunWriter
    from real_runs.rehearse import RehearsalError, verify
    cfg = rehearsal_config(load_config("paper-qwen3-1.7b"), "paper-qwen3-1.7b")
    writer = RunWriter(tmp_path / "run", {}, num_bins=10, producer="gdro train")
    for step, total in ((1, 1024), (2, 1000)):
        writer.log_step(step, {"total_rollouts": total, "num_unassigned": 256}, {"rollouts": [np.nan] * 10})
    writer.close()
    with pytest.raises(RehearsalError, match=r"rollouts per step \[1024. 1000.\], not 1024"):
        verify(tmp_path / "run", cfg)


# ----------------------------------------------------------------------------- the GDRO path

METHODS = ("grpo", "prompt_gdro", "rollout_gdro", "joint")


def _controllers(cfg, num_prompts: int):
    """The method step as ``real_runs.train`` builds it, over ``num_prompts`` prompt ids."""
    from gdro_lab import PromptIndex
    from gdro_lab.step import MethodStep
    mc, tc = cfg.method, cfg.train
    prompts = PromptIndex()
    index = prompts.intern([f"dapo:train:{i}" for i in range(num_prompts)])
    return MethodStep(mc.method(), mc.step_configs(), tc.seed, prompts), index, prompts


def _two_steps(cfg, step, index, prompts):
    """Steps 1 and 2 as the loop runs them on the rehearsal's random model: the data order's next P
    prompts, bins, plan, every response wrong (-1), updates; -> [(counts_P, multipliers_P, bins_P)] per step."""
    from gdro_lab import StepFeedback
    from real_runs.batching import DataOrder
    order = DataOrder(index.size, cfg.train.seed, True)
    controllers = step.controllers()
    out = []
    for _ in range(2):
        ids = index[order.take(cfg.train.prompts_per_step)]
        bins = controllers["classifier"].bins(ids)
        counts = np.asarray(controllers["allocator"].plan(bins, ids))
        total = int(counts.sum())
        feedback = StepFeedback(ids, bins, counts, -np.ones(total), np.zeros(total, bool), prompts=prompts)
        for family in ("classifier", "weighter", "allocator"):
            controllers[family].update(feedback)
        out.append((counts, controllers["weighter"].multipliers(bins), bins))
    return out


@pytest.mark.parametrize("num_prompts", [1096, 30])
@pytest.mark.parametrize("method", METHODS)
def test_the_seeded_history_makes_both_steps_exercise_the_method(method: str, num_prompts: int):
    """At paper scale (256 prompts x n_bar 4, arms 2..12; 1,096 prompts as the rehearsal's 96-token
    filter leaves, and a small set of 30 whose prompts recur within a step): after the seeded history
    every prompt of steps 1 and 2 has a bin; Rollout-GDRO's plan has prompts below and above n_bar
    at exactly P n_bar; Prompt-GDRO's multipliers differ from 1; GRPO stays uniform. Fresh
    controllers (the rehearsal before the history) plan n_bar for all with multipliers 1."""
    from real_runs.rehearse import seeded_history
    cfg = load_config("paper-qwen3-1.7b", [f"method.name={method}"])
    mc, budget = cfg.method, cfg.train.prompts_per_step * cfg.method.n_bar
    fresh = _two_steps(cfg, *_controllers(cfg, num_prompts))
    for counts, multipliers, bins in fresh[:1]:
        assert np.all(bins == -1) and np.all(counts == mc.n_bar) and np.all(multipliers == 1.0)
    controllers, index, prompts = _controllers(cfg, num_prompts)
    done = seeded_history(controllers, index, prompts, prompts_per_step=cfg.train.prompts_per_step, seed=cfg.train.seed)
    assert done["assigned"] == num_prompts and done["steps"] == 50 and done["rollouts"] == 50 * budget
    for counts, multipliers, bins in _two_steps(cfg, controllers, index, prompts):
        assert np.all(bins >= 0) and int(counts.sum()) == budget
        assert counts.min() >= mc.n_min and counts.max() <= mc.n_max
        if method in ("rollout_gdro", "joint"):
            assert counts.min() < mc.n_bar < counts.max()
        else:
            assert np.all(counts == mc.n_bar)
        if method in ("prompt_gdro", "joint"):
            assert np.any(multipliers != 1.0)
        else:
            assert np.all(multipliers == 1.0)


def test_the_seeded_history_is_seeded_and_visits_every_prompt():
    from real_runs.rehearse import seeded_history
    cfg = load_config("paper-qwen3-1.7b", ["method.name=joint", "train.prompts_per_step=8"])
    states = []
    for _ in range(2):
        controllers, index, prompts = _controllers(cfg, 500)
        done = seeded_history(controllers, index, prompts, prompts_per_step=8, seed=3, steps=10)
        assert done["steps"] == 63 and done["assigned"] == 500   # ceil(500 / 8) steps visit every prompt
        states.append(controllers.allocator.logits_GA.copy())
    np.testing.assert_array_equal(states[0], states[1])


def _run(tmp_path: Path, method: str, rollouts_G: list[list[float]], multipliers_G: list[list[float]],
         unassigned: int = 0) -> tuple[Path, object]:
    """A two-step run directory with the given per-bin mean rollouts and multipliers (256 prompts)."""
    from gdro_lab.runformat.runlog import RunWriter, read_run
    writer = RunWriter(tmp_path / method, {}, num_bins=3, producer="gdro train")
    for step, (rollouts, multipliers) in enumerate(zip(rollouts_G, multipliers_G), start=1):
        writer.log_step(step, {"total_rollouts": 1024, "num_prompts": 256, "num_unassigned": unassigned},
                        {"rollouts": rollouts, "multiplier": multipliers})
    writer.close()
    return tmp_path / method, read_run(tmp_path / method)


@pytest.mark.parametrize("method, rollouts, multipliers, unassigned, error", [
    # the old rehearsal: every prompt unassigned at both steps, n_bar for all, multipliers 1
    ("rollout_gdro", [[np.nan] * 3] * 2, [[np.nan] * 3] * 2, 256, "all 256 prompts unassigned"),
    ("joint", [[np.nan] * 3] * 2, [[np.nan] * 3] * 2, 256, "all 256 prompts unassigned"),
    ("rollout_gdro", [[3.0, 5.0, 4.0], [4.0, 4.0, 4.0]], [[1.0] * 3] * 2, 0, "step 2: .*not ragged around n_bar = 4"),
    ("rollout_gdro", [[3.0, 4.0, 4.0]] * 2, [[1.0] * 3] * 2, 0, "step 1: .*not ragged"),
    ("prompt_gdro", [[4.0] * 3] * 2, [[1.0] * 3] * 2, 0, "step 1: every Prompt-GDRO multiplier is 1"),
    ("prompt_gdro", [[3.0, 5.0, 4.0]] * 2, [[1.2, 1.0, 1.0]] * 2, 0, r"not n_bar = 4 for all \(allocator uniform\)"),
    ("grpo", [[4.0] * 3] * 2, [[1.0, 1.5, 1.0]] * 2, 0, r"not 1 \(weighter uniform\)"),
    ("joint", [[3.0, 5.0, 4.0]] * 2, [[1.0] * 3] * 2, 0, "every Prompt-GDRO multiplier is 1"),
])
def test_gdro_path_refuses_a_run_whose_controllers_did_not_act(tmp_path: Path, method, rollouts, multipliers,
                                                              unassigned, error):
    from real_runs.rehearse import RehearsalError, gdro_path
    cfg = rehearsal_config(load_config("paper-qwen3-1.7b", [f"method.name={method}"]), "paper-qwen3-1.7b")
    _, run = _run(tmp_path, method, rollouts, multipliers, unassigned)
    with pytest.raises(RehearsalError, match=error):
        gdro_path(run, cfg)


@pytest.mark.parametrize("method, rollouts, multipliers", [
    ("grpo", [4.0, 4.0, np.nan], [1.0, 1.0, np.nan]),
    ("prompt_gdro", [4.0, 4.0, 4.0], [1.0, 1.3, 2.0]),
    ("rollout_gdro", [3.0, 4.5, np.nan], [1.0, 1.0, np.nan]),
    ("joint", [2.5, 5.0, 4.0], [1.1, 1.3, 2.0]),
])
def test_gdro_path_passes_a_run_that_exercised_the_method(tmp_path: Path, method, rollouts, multipliers):
    from real_runs.rehearse import gdro_path
    cfg = rehearsal_config(load_config("paper-qwen3-1.7b", [f"method.name={method}"]), "paper-qwen3-1.7b")
    _, run = _run(tmp_path, method, [rollouts] * 2, [multipliers] * 2)
    lines = gdro_path(run, cfg)
    assert lines[0].startswith("step 1: 256 of 256 prompts in a bin") and lines[1].startswith("step 2:")


def test_a_small_data_set_gets_a_hint(tmp_path: Path):
    from real_runs.rehearse import RehearsalError, gdro_path
    cfg = rehearsal_config(load_config("paper-qwen3-1.7b", ["method.name=rollout_gdro"]), "paper-qwen3-1.7b")
    _, run = _run(tmp_path, "rollout_gdro", [[4.0] * 3] * 2, [[1.0] * 3] * 2)
    with pytest.raises(RehearsalError, match="the data set has 5 prompts for 256 per step: each recurs ~51 times"):
        gdro_path(run, cfg, distinct_prompts=5)


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
def test_the_rehearsal_exercises_each_method_end_to_end(method: str, tmp_path: Path, fixture_data: Path,
                                                         capsys: pytest.CaptureFixture[str]):
    """The whole rehearsal per method on the shipped fixtures (5 DAPO prompts under 96 tokens, so
    32 prompts per step: at 256 each prompt would recur ~51 times in step 1 and its all-wrong
    outcomes would fill its classifier window). Read back from steps.jsonl, not from the rehearsal's
    own check: every prompt has a bin at both steps; the per-bin mean rollouts straddle n_bar with
    Rollout-GDRO and equal it otherwise; Prompt-GDRO's per-bin multipliers differ from 1, the
    others' equal 1. The rehearsal before the seeded history passed with none of this."""
    from gdro_lab.runformat.runlog import read_run
    argv = ["paper-qwen3-1.7b", "--rehearse", f"method.name={method}", "train.prompts_per_step=32",
            "--out", str(tmp_path)]
    assert train_cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "rehearsal: seeded history: 50 synthetic steps of 32 prompts (of 5;" in out and "rehearsal passed" in out
    run = read_run(tmp_path / f"rehearsal-paper-qwen3-1.7b-{method}")
    assert run.steps.tolist() == [1, 2] and np.all(run.scalars["total_rollouts"] == 128)
    assert np.all(run.scalars["num_unassigned"] == 0)
    for t in range(2):
        arms = run.bins["rollouts"][t][np.isfinite(run.bins["rollouts"][t])]
        multipliers = run.bins["multiplier"][t][np.isfinite(run.bins["multiplier"][t])]
        if method in ("rollout_gdro", "joint"):
            assert arms.min() < 4 < arms.max(), arms
        else:
            assert np.all(arms == 4), arms
        if method in ("prompt_gdro", "joint"):
            assert np.any(multipliers != 1.0), multipliers
        else:
            assert np.all(multipliers == 1.0), multipliers


def test_the_rehearsal_names_its_run_first_and_each_long_phase_beats(tmp_path: Path, monkeypatch):
    """The first line is the run directory; step 1, step 2 and the check are phases (start, heartbeat,
    end) on the rehearsal's own output. The trainer is replaced by one that returns once a heartbeat of
    its phase has been printed (the interval lowered: no sleeping, no timing) and the check by none."""
    import json
    import threading

    from real_runs import progress, rehearse, train
    lines: list[str] = []
    beat = threading.Event()

    def out(line: str) -> None:
        lines.append(line)
        if line.endswith(" started"):  # the previous phase's heartbeat thread has ended
            beat.clear()
        if "still running" in line:
            beat.set()

    run_dir = tmp_path / "rehearsal-paper-qwen3-1.7b-grpo"

    def fake_main(cfg, resume=None, stop_after=None, warm_start=None):
        assert beat.wait(600), lines
        run_dir.mkdir(exist_ok=True)
        (run_dir / "timing.json").write_text(json.dumps(
            {"seconds/log": 0.0, "seconds/checkpoint": 0.0, "share/overhead": 0.0, "share/compute": 1.0}))
        return run_dir

    def fake_verify(path, cfg):
        assert beat.wait(600), lines
        return ["verified: (a stand-in)"]

    monkeypatch.setattr(progress, "EVERY_S", 0.01)
    monkeypatch.setattr(train, "main", fake_main)
    monkeypatch.setattr(rehearse, "verify", fake_verify)
    monkeypatch.setattr(rehearse, "phase_table", lambda path: [])
    assert rehearse.rehearse("paper-qwen3-1.7b", [f"train.out={tmp_path}"], out=out) == run_dir
    assert lines[0] == f"rehearsal: run directory {run_dir}"
    for label in ("step 1 (start-up, data, model, seeded history, step, checkpoint)",
                  "step 2 (resume: load, step, evaluation, checkpoint)",
                  "checking the run (log, evaluation, checkpoints load)"):
        started = lines.index(f"rehearsal: {label} started")
        assert lines[started + 1].startswith(f"rehearsal: {label} still running after "), lines
        assert any(line.startswith(f"rehearsal: {label} done in ") for line in lines[started + 1:]), lines
    assert lines[-1] == f"rehearsal passed: {run_dir}"
