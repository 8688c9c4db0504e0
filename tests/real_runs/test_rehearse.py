"""`gdro train paper-qwen3-1.7b --rehearse`: the paper preset's whole path on CPU, end to end (issue 20.3).

The rehearsal changes only the model (a shrunk Qwen3), the lengths, the per-benchmark evaluation
limit and bf16 autocast on CPU (real_runs/rehearse.py), runs step 1, stops with a checkpoint,
resumes for step 2 with the preset's evaluation, and checks what ran; a failure is exit 2.
Measured: see docs/benchmarks.md ("Rehearsal of the paper presets").
"""

from __future__ import annotations

from pathlib import Path

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
    torch.set_num_threads(2)
    _check_data()
    assert train_cli.main(["paper-qwen3-1.7b", "--rehearse", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for needle in ("model.name: 'Qwen/Qwen3-1.7B-Base' -> 'tiny-rehearsal'", "1,720,574,976 parameters",
                   "projected GPU memory", "peak = static + max(update, generation)", "H200 141 GB",
                   "80 GB card", "| step | plan | generate |", "trainer overhead", "verified: steps 1..2",
                   "1024 rollouts per step", "4 optimizer steps (2 mini-batches per step)",
                   "7 benchmarks scored at k=8", "rehearsal passed"):
        assert needle in out, needle
    run_dir = tmp_path / "rehearsal-paper-qwen3-1.7b-grpo"
    assert (run_dir / "checkpoints" / "step_00000002" / "model.safetensors").exists()


def test_a_failure_in_the_path_is_one_line_and_exit_2(tmp_path: Path, monkeypatch, capsys):
    from real_runs import preflight

    def broken(cfg):
        raise ValueError("data.train='dapo': the parquet file is truncated")

    monkeypatch.setattr(preflight, "load_train_records", broken)
    assert train_cli.main(["paper-qwen3-1.7b", "--rehearse", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "gdro train: data.train='dapo': the parquet file is truncated"


def test_verify_refuses_a_run_that_did_not_follow_the_preset(tmp_path: Path):
    """A run whose budget or evaluation differs from the preset's is a RehearsalError."""
    import numpy as np

    from gdro_lab.runlog import RunWriter
    from real_runs.rehearse import RehearsalError, verify
    cfg = rehearsal_config(load_config("paper-qwen3-1.7b"), "paper-qwen3-1.7b")
    writer = RunWriter(tmp_path / "run", {}, num_bins=10, producer="gdro train")
    for step, total in ((1, 1024), (2, 1000)):
        writer.log_step(step, {"total_rollouts": total, "num_unassigned": 256}, {"rollouts": [np.nan] * 10})
    writer.close()
    with pytest.raises(RehearsalError, match=r"rollouts per step \[1024. 1000.\], not 1024"):
        verify(tmp_path / "run", cfg)
