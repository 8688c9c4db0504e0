"""Data preparation in one command: docs/install.md's exact commands on the repository's fixtures.

`python -m real_runs.verl.convert --out DIR paper` writes the paper preset's training set (its
English filter) and its evaluation sets in verl's layout. Checked against the source files read
directly (row counts, ids = source:split:row, ground truths) and against real_runs.data's CJK
filter; the full data's counts (14,485 English rows) where the full data is present. Needs pyarrow
only (not verl): verl reading these files is tests/real_runs/verl/test_verl_data.py.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pq = pytest.importorskip("pyarrow.parquet")
import pyarrow as pa  # noqa: E402

from real_runs.config import load_config  # noqa: E402
from real_runs.data import BENCHMARKS, has_cjk, strip_wrapper  # noqa: E402
from real_runs.verl import convert  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "data"
EVAL_SETS = ["math500", "aime24", "aime25", "amc23", "minerva", "olympiadbench", "gpqa"]
FULL_COUNTS = {"dapo_train": 14485, "math500": 500, "aime24": 30, "aime25": 30, "amc23": 40, "minerva": 272,
               "olympiadbench": 675, "gpqa": 198}


def docs_commands() -> list[tuple[dict[str, str], list[str]]]:
    """docs/install.md's convert commands, each with the variables exported just before it."""
    text = (ROOT / "docs" / "install.md").read_text()
    commands, exported = [], {}
    for line in text.splitlines():
        if line.startswith("export "):
            name, _, value = line[len("export "):].partition("=")
            exported[name] = value
        elif line.startswith("python -m real_runs.verl.convert"):
            commands.append((dict(exported), shlex.split(line)))
    return commands


def run_docs_command(env_vars: dict[str, str], argv: list[str], data: Path, out: Path) -> subprocess.CompletedProcess:
    """The command with the docs' folders replaced by ``data`` and ``out`` (nothing else changed)."""
    args = list(argv[1:])
    for flag, value in (("--data-dir", data), ("--out", out)):
        if flag in args:
            args[args.index(flag) + 1] = str(value)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("GDRO_DATA", None)
    if "GDRO_DATA" in env_vars:
        env["GDRO_DATA"] = str(data)
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def raw_rows(root: Path, name: str) -> list[dict]:
    """A source file's rows as stored (jsonl lines or parquet rows), read without real_runs.data."""
    path = root / BENCHMARKS[name].files[BENCHMARKS[name].default_split]
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return pq.read_table(path).to_pylist()


def dapo_question(row: dict) -> str:
    return row["prompt"][-1]["content"]


def check_outputs(out: Path, data: Path) -> dict[str, int]:
    """Every file of `paper`: the layout, ids, ground truths and the English filter."""
    files = sorted(p.name for p in out.iterdir())
    assert files == sorted(["dapo_train.parquet"] + [f"{b}.parquet" for b in EVAL_SETS])
    written = {p.stem: pq.read_table(p).to_pylist() for p in out.iterdir()}
    # training set: the raw rows minus those with CJK text, ids = raw row numbers, gold = raw ground truth
    raw = raw_rows(data, "dapo")
    keep = [i for i, row in enumerate(raw) if not has_cjk(dapo_question(row))]
    train = written["dapo_train"]
    assert [r["extra_info"]["index"] for r in train] == [f"dapo:train:{i}" for i in keep]
    assert [r["reward_model"]["ground_truth"] for r in train] == [raw[i]["reward_model"]["ground_truth"] for i in keep]
    assert all(r["data_source"] == "dapo" and r["ability"] == "math" for r in train)
    assert all(strip_wrapper(dapo_question(raw[i])) in r["prompt"][0]["content"] for i, r in zip(keep, train))
    assert not any(has_cjk(r["prompt"][0]["content"]) for r in train)
    # evaluation sets: every row, ids = row numbers of the test split
    for name in EVAL_SETS:
        rows, source = written[name], raw_rows(data, name)
        assert len(rows) == len(source), name
        assert [r["extra_info"]["index"] for r in rows] == [f"{name}:test:{i}" for i in range(len(source))]
        assert {r["data_source"] for r in rows} == {name}
        assert all(r["reward_model"]["ground_truth"] for r in rows)
    math500 = raw_rows(data, "math500")
    assert [r["reward_model"]["ground_truth"] for r in written["math500"]] == [row["answer"] for row in math500]
    assert [r["reward_model"]["ground_truth"] for r in written["aime24"]] == [
        str(int(row["answer"])) for row in raw_rows(data, "aime24")]          # AIME's "023" -> "23"
    assert {r["reward_model"]["ground_truth"][:3] for r in written["gpqa"]} <= {"A) ", "B) ", "C) ", "D) "}
    return {name: len(rows) for name, rows in written.items()}


def test_docs_give_the_data_dir_and_the_gdro_data_forms():
    commands = docs_commands()
    assert [argv[-1] for _, argv in commands][:2] == ["paper", "paper"]
    assert "--data-dir" in commands[0][1] and "GDRO_DATA" not in commands[0][0]
    assert "--data-dir" not in commands[1][1] and "GDRO_DATA" in commands[1][0]


@pytest.mark.parametrize("form", [0, 1], ids=["data-dir", "GDRO_DATA"])
def test_docs_command_writes_every_paper_set_from_the_fixtures(tmp_path: Path, form: int):
    env_vars, argv = docs_commands()[form]
    result = run_docs_command(env_vars, argv, FIXTURES, tmp_path / "verl_data")
    assert result.returncode == 0, result.stderr
    counts = check_outputs(tmp_path / "verl_data", FIXTURES)
    assert counts == {"dapo_train": 64, "math500": 32, "aime24": 24, "aime25": 24, "amc23": 24, "minerva": 32,
                      "olympiadbench": 32, "gpqa": 24}
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 8 and lines[0].endswith("dapo_train.parquet (English only: 0 rows with CJK text dropped)")


def test_paper_follows_the_preset(monkeypatch: pytest.MonkeyPatch):
    cfg = load_config(convert.PAPER_PRESET)
    jobs = convert.paper_jobs()
    assert cfg.data.train == "dapo" and cfg.data.english_only
    assert (jobs[0].name, jobs[0].english_only, jobs[0].filename) == ("dapo", True, "dapo_train.parquet")
    assert [j.name for j in jobs[1:]] == list(cfg.eval.benchmarks) and sorted(cfg.eval.benchmarks) == sorted(EVAL_SETS)
    assert not any(j.english_only for j in jobs[1:])


def with_cjk_rows(tmp_path: Path) -> Path:
    """The fixtures, with rows 1, 5 and 6 of DAPO's file turned Chinese (kana for row 6)."""
    data = tmp_path / "data"
    for name in ("dapo", *EVAL_SETS):
        relative = BENCHMARKS[name].files[BENCHMARKS[name].default_split]
        (data / relative).parent.mkdir(parents=True, exist_ok=True)
        (data / relative).write_bytes((FIXTURES / relative).read_bytes())
    path = data / BENCHMARKS["dapo"].files["train"]
    table = pq.read_table(path)
    rows = table.to_pylist()
    for i, text in ((1, "求 x 的值"), (5, "三角形の面積"), (6, "计算 1+1")):
        rows[i]["prompt"][-1]["content"] = rows[i]["prompt"][-1]["content"] + " " + text
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)
    return data


def test_english_filter_drops_exactly_the_cjk_rows_and_keeps_row_ids(tmp_path: Path, capsys):
    data = with_cjk_rows(tmp_path)
    assert convert.main(["--data-dir", str(data), "--out", str(tmp_path / "out"), "paper"]) == 0
    counts = check_outputs(tmp_path / "out", data)       # ids against has_cjk on the raw rows
    assert counts["dapo_train"] == 64 - 3
    ids = [r["extra_info"]["index"] for r in pq.read_table(tmp_path / "out" / "dapo_train.parquet").to_pylist()]
    assert ids[:5] == ["dapo:train:0", "dapo:train:2", "dapo:train:3", "dapo:train:4", "dapo:train:7"]
    assert "(English only: 3 rows with CJK text dropped)" in capsys.readouterr().out


def test_alias_and_registered_name_write_the_same_file(tmp_path: Path):
    assert convert.main(["--data-dir", str(FIXTURES), "--out", str(tmp_path / "a"), "dapo_math_17k"]) == 0
    assert convert.main(["--data-dir", str(FIXTURES), "--out", str(tmp_path / "b"), "dapo"]) == 0
    a, b = (pq.read_table(tmp_path / d / "dapo_train.parquet").to_pylist() for d in "ab")
    assert a == b and a[0]["extra_info"]["index"] == "dapo:train:0"
    assert convert.main(["--data-dir", str(FIXTURES), "--out", str(tmp_path / "c"), "minerva_math", "gpqa_diamond"]) == 0
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["gpqa.parquet", "minerva.parquet"]


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("GDRO_DATA", raising=False)
    out = tmp_path / "out"
    assert convert.main(["--data-dir", str(tmp_path / "nope"), "--out", str(out), "paper"]) == 2
    assert one_error_line(capsys).startswith(f"error: data folder {tmp_path / 'nope'} (--data-dir) does not exist")
    monkeypatch.setenv("GDRO_DATA", str(tmp_path / "nope"))
    assert convert.main(["--out", str(out), "paper"]) == 2
    assert "(GDRO_DATA) does not exist: pass --data-dir DIR or set GDRO_DATA" in one_error_line(capsys)
    assert convert.main(["--data-dir", str(FIXTURES), "--out", str(out), "dapo_math_18k"]) == 2
    line = one_error_line(capsys)
    assert line.startswith("error: unknown data set 'dapo_math_18k': use one of paper, ")
    assert all(name in line for name in list(BENCHMARKS) + ["dapo_math_17k (= dapo)"])
    # a data folder missing one file: nothing written
    partial = tmp_path / "partial"
    (partial / "math500").mkdir(parents=True)
    (partial / "math500" / "test.jsonl").write_bytes((FIXTURES / "math500" / "test.jsonl").read_bytes())
    assert convert.main(["--data-dir", str(partial), "--out", str(out), "paper"]) == 2
    assert "dapo_math_17k/dapo_math_17k.parquet is missing" in one_error_line(capsys) and not out.exists()
    # an existing output: refused before anything is written, the user's file untouched
    out.mkdir()
    (out / "gpqa.parquet").write_text("mine")
    assert convert.main(["--data-dir", str(FIXTURES), "--out", str(out), "paper"]) == 2
    assert "gpqa.parquet already exists" in one_error_line(capsys)
    assert sorted(p.name for p in out.iterdir()) == ["gpqa.parquet"] and (out / "gpqa.parquet").read_text() == "mine"
    assert convert.main(["--data-dir", str(FIXTURES), "--out", str(out), "paper", "--limit", "3"]) == 2
    assert "single-file form" in one_error_line(capsys)


def test_single_file_form_keeps_working(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GDRO_DATA", str(FIXTURES))
    assert convert.main(["dapo_math_17k", str(tmp_path / "d.parquet"), "--limit", "5", "--english-only"]) == 0
    rows = pq.read_table(tmp_path / "d.parquet").to_pylist()
    assert [r["extra_info"]["index"] for r in rows] == [f"dapo:train:{i}" for i in range(5)]
    assert capsys.readouterr().out.strip() == f"wrote 5 prompts to {tmp_path / 'd.parquet'}"


def test_full_data_gives_the_paper_counts(tmp_path: Path, shared_data: Path, capsys):
    """14,485 English rows of 17,917 (3,432 with CJK text), every row of each evaluation set."""
    assert convert.main(["--data-dir", str(shared_data), "--out", str(tmp_path / "out"), "paper"]) == 0
    assert check_outputs(tmp_path / "out", shared_data) == FULL_COUNTS
    assert "(English only: 3432 rows with CJK text dropped)" in capsys.readouterr().out


def test_the_launch_scripts_read_exactly_the_files_paper_writes():
    """paper_run.sh checks and reads $VERL_DATA/<name>.parquet for its training set and VAL_SETS: the same
    file names `convert ... paper` writes (they drifted once: the script read dapo.parquet)."""
    import re

    script = (Path(__file__).resolve().parents[2] / "real_runs" / "verl" / "configs" / "paper_run.sh").read_text()
    val_sets = re.search(r"^VAL_SETS=\(([^)]*)\)", script, re.M).group(1).split()
    checked = re.search(r'for name in (\S+) "\$\{VAL_SETS\[@\]\}"; do', script).group(1)
    train = re.search(r"data\.train_files=\"'\$VERL_DATA/([\w.]+)'\"", script).group(1)
    written = sorted(job.filename for job in convert.paper_jobs())
    assert sorted([f"{checked}.parquet", *(f"{v}.parquet" for v in val_sets)]) == written
    assert train == convert.TRAIN_FILE
