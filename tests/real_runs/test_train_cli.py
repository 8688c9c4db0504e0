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


def test_resume_of_a_foreign_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    one_line_error(capsys, ["--resume", str(tmp_path)], "not a gdro run directory")
    simulators = pytest.importorskip("simulators.api")
    sim_run = simulators.write_tiny_run(tmp_path / "sim")
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
