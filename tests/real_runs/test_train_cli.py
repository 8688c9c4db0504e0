"""`gdro train` command line: presets, overrides, and bad input as one line with nothing lost."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from gdro_cli.main import main as gdro  # noqa: E402
from real_runs import train_cli  # noqa: E402

FAST = ["train.steps=1", "data.limit=8", "eval.every=0", "train.progress=false"]


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> str:
    assert train_cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gdro train: ") and "\n" not in err and "Traceback" not in err, err
    assert needle in err, err
    return err


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cli")
    assert gdro(["train", "tiny-cpu", *FAST, "train.run_name=done", "--out", str(out)]) == 0
    return out / "done"


def test_list_and_print_config(capsys: pytest.CaptureFixture[str]):
    assert train_cli.main(["--list"]) == 0
    assert {"tiny-cpu", "paper-qwen3-1.7b", "paper-qwen3-4b", "paper-qwen3-8b"} <= set(capsys.readouterr().out.split())
    assert train_cli.main(["paper-qwen3-4b", "method.name=joint", "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["method"]["name"] == "joint" and printed["train"]["prompts_per_step"] == 256


def test_a_finished_run_is_complete_and_cannot_be_resumed(finished_run: Path, capsys: pytest.CaptureFixture[str]):
    assert json.loads((finished_run / "meta.json").read_text())["status"] == "finished"
    before = digest(finished_run)
    one_line_error(capsys, ["--resume", str(finished_run)], "already finished")
    assert digest(finished_run) == before


def test_a_new_run_never_overwrites_an_existing_one(finished_run: Path, capsys: pytest.CaptureFixture[str]):
    before = digest(finished_run)
    one_line_error(capsys, ["tiny-cpu", *FAST, "train.run_name=done", "--out", str(finished_run.parent)],
                   "already holds a run")
    assert digest(finished_run) == before

def test_stop_after_ends_with_a_checkpoint_and_resume_finishes(tmp_path: Path):
    fast = ["train.steps=2", "data.limit=8", "eval.every=0", "train.progress=false", "train.save_every=5"]
    assert gdro(["train", "tiny-cpu", *fast, "train.run_name=cut", "--stop-after", "1", "--out", str(tmp_path)]) == 0
    run = tmp_path / "cut"
    assert json.loads((run / "meta.json").read_text())["status"] == "stopped"
    assert [json.loads(line)["step"] for line in (run / "steps.jsonl").read_text().splitlines()] == [1]
    assert [p.name for p in (run / "checkpoints").iterdir()] == ["step_00000001"]  # saved at the stop
    assert gdro(["train", "--resume", str(run)]) == 0
    assert json.loads((run / "meta.json").read_text())["status"] == "finished"
    assert [json.loads(line)["step"] for line in (run / "steps.jsonl").read_text().splitlines()] == [1, 2]


def test_resume_of_a_foreign_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    one_line_error(capsys, ["--resume", str(tmp_path)], "not a gdro run directory")
    simulated_run = pytest.importorskip("simulated_run")
    sim_run = simulated_run.write_tiny_run(tmp_path / "sim")
    sim_dir = Path(sim_run) if sim_run is not None else tmp_path / "sim"
    before = digest(sim_dir)
    one_line_error(capsys, ["--resume", str(sim_dir)], "only gdro train runs can be resumed")
    assert digest(sim_dir) == before


@pytest.mark.parametrize("args,needle", [
    (["tiny-cpu", "train.stepz=2"], "unknown config key train.stepz"),
    (["tiny-cpu", "loss.clip_high=-1"], "loss.clip_high=-1"),
    (["tiny-cpu", "method.name=dro"], "method.name='dro' is invalid"),
    (["tiny-gpu"], "neither a TOML file nor a preset"),
    ([], "give a CONFIG"),
    (["tiny-cpu", "--resume", "somewhere"], "--resume continues a run with its own saved config"),
    (["tiny-cpu", "--stop-after", "0"], "--stop-after 0"),
    (["tiny-cpu", "model.name=/no/such/model"], "model folder /no/such/model does not exist"),
    (["tiny-cpu", "data.train=/no/such/data.parquet"], "data.parquet"),
    (["tiny-cpu", "eval.benchmarks=[\"math5000\"]"], "math5000"),
])
def test_bad_input_is_one_line_and_writes_nothing(args, needle, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    one_line_error(capsys, args + ["--out", str(tmp_path / "out")] if args and "--resume" not in args else args, needle)
    assert not (tmp_path / "out").exists()


def test_a_data_set_without_answers(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    data = tmp_path / "noanswers.jsonl"
    data.write_text("".join(json.dumps({"problem": f"What is {i}+1?", "answer": ""}) + "\n" for i in range(5)))
    one_line_error(capsys, ["tiny-cpu", f"data.train={json.dumps(str(data))}", "--out", str(tmp_path / "out")],
                   "no usable records")
    assert not (tmp_path / "out").exists()


def test_a_model_folder_without_weights(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    one_line_error(capsys, ["tiny-cpu", f"model.name={json.dumps(str(folder))}", "--out", str(tmp_path / "out")],
                   "has no weights")


# ----------------------------------------------------------------------------- issue 20: folders, locks, fast failures

def test_overrides_may_follow_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """`gdro train tiny-cpu --out X key=value` parses (argparse's plain parse refused it)."""
    assert train_cli.main(["tiny-cpu", "--out", str(tmp_path), "train.steps=3", "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["train"]["steps"] == 3 and printed["train"]["out"] == str(tmp_path)


def test_a_foreign_folder_named_like_the_run_is_refused_and_untouched(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]):
    """`--out X` where X/<run-name>/ is the user's own folder: exit 2, nothing written (it used to
    overwrite the user's config.json and leave an unreadable run)."""
    mine = tmp_path / "grpo-tiny-s0"
    mine.mkdir()
    (mine / "config.json").write_text('{"mine": true}')
    (mine / "notes.txt").write_text("keep me")
    before = digest(tmp_path)
    one_line_error(capsys, ["tiny-cpu", *FAST, "--out", str(tmp_path)], "exists and is not a gdro run")
    assert digest(tmp_path) == before


def test_an_existing_run_is_reported_before_the_model_and_data_load(finished_run: Path, monkeypatch,
                                                                    capsys: pytest.CaptureFixture[str]):
    from real_runs import data, models

    def forbidden(*args, **kwargs):
        raise AssertionError("loaded before the output folder was checked")

    monkeypatch.setattr(models, "load_policy", forbidden)
    monkeypatch.setattr(data, "load_train_records", forbidden)
    one_line_error(capsys, ["tiny-cpu", *FAST, "train.run_name=done", "--out", str(finished_run.parent)],
                   "already holds a run")


def test_out_naming_a_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    file = tmp_path / "a-file"
    file.write_text("x")
    err = one_line_error(capsys, ["tiny-cpu", *FAST, "--out", str(file)], "is a file, not a folder")
    assert "Errno" not in err and file.read_text() == "x"


def test_cuda_without_a_gpu_names_the_config_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the message is for machines without it")
    err = one_line_error(capsys, ["tiny-cpu", *FAST, "model.device=cuda", "--out", str(tmp_path / "out")],
                         "model.device=cuda but CUDA is not available")
    assert "--device" not in err and "set model.device=cpu" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args,needle", [
    (["data.train=/no/such/data.parquet"], "data file /no/such/data.parquet does not exist"),
    (["data.train=missing/rows.jsonl"], "does not exist"),
    (["optim.lr=100"], "optim.lr=100.0 is invalid: must be a finite number in (0.0, 0.1]"),
    (["model.name=\"no-org/no-such-model-xyz\""], "not in the local Hugging Face cache"),
])
def test_unclear_failures_are_clear(args, needle, tmp_path: Path, monkeypatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")   # the hub id case: deterministic without a network
    one_line_error(capsys, ["tiny-cpu", *FAST, *args, "--out", str(tmp_path / "out")], needle)
    assert not (tmp_path / "out").exists()


def test_an_unreachable_hub_fails_after_one_probe(tmp_path: Path, monkeypatch, capsys: pytest.CaptureFixture[str]):
    """No cache, no network: one probe of the hub, then one line (transformers retried for ~70 s)."""
    import huggingface_hub
    import huggingface_hub.constants
    import transformers

    calls = []

    def unreachable(self, repo_id, **kwargs):
        calls.append((repo_id, kwargs.get("timeout")))
        raise ConnectionError("[Errno -2] Name or service not known")

    def forbidden(*args, **kwargs):
        raise AssertionError("transformers was asked to download")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", unreachable)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", forbidden)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", forbidden)
    err = one_line_error(capsys, ["tiny-cpu", *FAST, "model.name=\"no-org/no-such-model-xyz\"",
                                  "--out", str(tmp_path / "out")], "the hub cannot serve it (ConnectionError")
    assert calls == [("no-org/no-such-model-xyz", 5.0)] and "hf download" in err


def test_long_prompts_dropped_are_counted(tmp_path: Path, capsys: pytest.CaptureFixture[str], data_dir):
    assert train_cli.main(["tiny-cpu", *FAST, "rollout.max_prompt_tokens=200", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    summary = json.loads((tmp_path / "grpo-tiny-s0" / "data.json").read_text())
    assert 0 < summary["dropped_too_long"] < 8 and summary["prompts"] == 8 - summary["dropped_too_long"]
    assert f"dropped {summary['dropped_too_long']} of 8 training prompts longer than rollout.max_prompt_tokens=200" in err


def test_dry_run_validates_and_plans_without_loading_a_model(tmp_path: Path, monkeypatch,
                                                            capsys: pytest.CaptureFixture[str]):
    import transformers

    from real_runs import models

    def forbidden(*args, **kwargs):
        raise AssertionError("a model was loaded by --dry-run")

    monkeypatch.setattr(models, "load_policy", forbidden)
    monkeypatch.setattr(models, "build_qwen3", forbidden)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", forbidden)
    assert train_cli.main(["tiny-cpu", "method.name=joint", "--out", str(tmp_path / "out"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    for needle in ("output       ", "new run (ok)", "model        tiny", "data         dapo: 8 problems",
                   "prompts      0 of 8 prompts longer than 512 tokens", "steps        6 x 4 prompts = 24",
                   "rollouts     16 per step", "arms 2..8", "evaluation   every 3 steps and at the end (2 evaluations): "
                   "math500 4 = 4 problems x k=2 = 8 samples", "checkpoints  3 saves, newest 2 kept",
                   "188,800 parameters", "projected GPU memory", "nothing was written"):
        assert needle in out, needle
    assert not (tmp_path / "out").exists()


def test_dry_run_lists_every_problem_and_exits_2(tmp_path: Path, monkeypatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "file").write_text("x")
    assert train_cli.main(["paper-qwen3-1.7b", "--out", str(tmp_path / "file"), "--dry-run"]) == 2
    captured = capsys.readouterr()
    assert "output       ERROR" in captured.out and "model        ERROR" in captured.out
    assert "1.72 B" in captured.out or "1,720,574,976 parameters" in captured.out   # sizes from the known shape
    err = captured.err.strip()
    assert err.startswith("gdro train: dry run found 2 problem(s): output:") and "\n" not in err


@pytest.fixture
def stopped_run(tmp_path: Path) -> Path:
    """A tiny run stopped after step 1 of 2 with a checkpoint (status "stopped", resumable)."""
    from real_runs import train
    from real_runs.config import load_config
    cfg = load_config("tiny-cpu", [*FAST, "train.steps=2", "train.run_name=stopped",
                                   f"train.out={json.dumps(str(tmp_path))}"])
    run_dir = train.main(cfg, stop_after=1)
    assert json.loads((run_dir / "meta.json").read_text())["status"] == "stopped"
    return run_dir


def test_a_second_writer_is_refused_while_the_first_lives_and_welcome_after(stopped_run: Path,
                                                                           capsys: pytest.CaptureFixture[str]):
    """Another process holds the run's lock: --resume refuses in one line and touches nothing; once
    that process is gone (killed: the kernel drops its flock) the resume runs."""
    import subprocess
    import sys
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from gdro_lab.runformat.runlog import RunLock; "
                               f"RunLock({str(stopped_run)!r}).acquire(); print('locked', flush=True); time.sleep(600)"],
                              stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        before = digest(stopped_run)
        err = one_line_error(capsys, ["--resume", str(stopped_run)], "is being written by pid")
        assert f"pid {holder.pid}" in err
        assert digest(stopped_run) == before
    finally:
        holder.kill()
        holder.wait()
    capsys.readouterr()
    assert train_cli.main(["--resume", str(stopped_run)]) == 0
    assert json.loads((stopped_run / "meta.json").read_text())["status"] == "finished"
    lines = capsys.readouterr().out.splitlines()  # a resume names its run first too, before the model loads
    assert lines[0] == f"gdro train: run directory {stopped_run} (resuming, up to step 2)", lines
    assert lines[1].startswith("gdro train: start-up: model load (tiny on cpu) started"), lines
    assert f"gdro train: run directory {stopped_run} (steps 2..2)" in lines


def test_the_trainer_holds_the_lock_while_it_writes(tmp_path: Path):
    """While a step runs, another writer (here: another open file description, as a second process
    has) cannot take the run's lock; after the run it can."""
    import numpy as np

    from real_runs import train
    from real_runs.config import load_config
    from gdro_lab.runformat.runlog import RunLock, RunLockedError
    from real_runs.types import RewardResult
    run_dir = tmp_path / "locked"
    seen = []

    class Probe:
        def score(self, responses, answers):
            try:
                RunLock(run_dir).acquire().release()
                seen.append("acquired")
            except RunLockedError as err:
                seen.append(str(err))
            return RewardResult(-np.ones(len(responses)), np.zeros(len(responses), bool), {})

    cfg = load_config("tiny-cpu", [*FAST, "train.run_name=locked", f"train.out={json.dumps(str(tmp_path))}"])
    train.main(cfg, reward=Probe())
    assert len(seen) == 1 and "is being written by pid" in seen[0]
    RunLock(run_dir).acquire().release()


def test_resume_of_a_live_run_before_its_first_checkpoint_names_the_writer(tmp_path: Path):
    """A first-run defect: `gdro train --resume RUN` while RUN's trainer is still in its first step (no
    checkpoint yet) answered "no complete checkpoint yet: delete the folder and start the run again".
    The lock is checked first: the answer names the writer and never advises deleting a live run."""
    import contextlib
    import io
    import os

    import numpy as np

    from real_runs import train
    from real_runs.config import load_config
    from real_runs.types import RewardResult
    run_dir = tmp_path / "live"
    answers: list[tuple[int, str, bool]] = []

    class ResumeWhileLive:
        """The reward of step 1 tries a resume, as a user in a second shell would."""

        def score(self, responses, answers_R):
            if not answers:
                err = io.StringIO()
                with contextlib.redirect_stderr(err):
                    rc = train_cli.main(["--resume", str(run_dir)])
                answers.append((rc, err.getvalue(), (run_dir / "checkpoints").exists()))
            return RewardResult(-np.ones(len(responses)), np.zeros(len(responses), bool), {})

    cfg = load_config("tiny-cpu", [*FAST, "train.run_name=live", f"train.out={json.dumps(str(tmp_path))}"])
    train.main(cfg, reward=ResumeWhileLive())
    [(rc, err, had_checkpoint)] = answers
    assert not had_checkpoint, "the resume must be tried before the first checkpoint"
    assert rc == 2 and err.count("\n") == 1, err
    assert f"--resume {run_dir} is being written by pid {os.getpid()}" in err, err
    assert "delete" not in err and "checkpoint" not in err, err


def test_the_run_directory_is_the_first_line_then_a_line_per_start_up_phase(tmp_path: Path, monkeypatch,
                                                                             capsys: pytest.CaptureFixture[str]):
    """stdout's first line names the run directory before the model loads (it came after model and data,
    ~49 s into a paper run); then each start-up phase (model, data, evaluation sets, engine) starts and
    ends, and a long one beats: the interval lowered and the model load held until a beat came (no
    sleeping, no timing)."""
    import threading

    from real_runs import models, progress, train_setup
    beat = threading.Event()

    def say(line: str) -> None:
        print(line, flush=True)
        if "still running" in line:
            beat.set()

    real_load = models.load_policy

    def slow_load(*args, **kwargs):
        assert beat.wait(600), "no heartbeat during the model load"
        return real_load(*args, **kwargs)

    monkeypatch.setattr(progress, "EVERY_S", 0.01)
    monkeypatch.setattr(train_setup, "_say", say)
    monkeypatch.setattr(models, "load_policy", slow_load)
    assert train_cli.main(["tiny-cpu", *FAST, "eval.every=1", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    run_dir = tmp_path / "grpo-tiny-s0"
    assert lines[0] == (f"gdro train: run directory {run_dir} (a new run, steps 1..1, created once the model and "
                        "the data have loaded)")
    assert lines[1] == "gdro train: start-up: model load (tiny on cpu) started"
    assert lines[2].startswith("gdro train: start-up: model load (tiny on cpu) still running after ")
    ends = [line.split(" done in ")[0] for line in lines if " done in " in line]
    assert ends == ["gdro train: start-up: model load (tiny on cpu)", "gdro train: start-up: data load (data.train=dapo)",
                    "gdro train: start-up: evaluation sets load (math500)",
                    "gdro train: start-up: engine start (rollout.engine=hf)"]
    assert lines.index(f"gdro train: run directory {run_dir} (steps 1..1)") > lines.index(
        next(line for line in lines if line.startswith("gdro train: start-up: engine start (rollout.engine=hf) done")))
    assert lines[-1] == f"gdro train: run directory {run_dir}"
