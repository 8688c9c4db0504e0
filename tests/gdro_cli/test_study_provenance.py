"""`gdro study`'s report records the code that made its runs (gdro_cli/study_provenance.py): the digest taken as the
study starts, kept in OUT/provenance.json for a later --report-only, and a one-line note when the code
changed since. The study itself is replaced by a stand-in that writes what it writes (a report's
summary.json); the folder rule is checked against the study's own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gdro_cli import study_provenance as study
from real_runs.lmstudy import cli
from studykit import provenance
from studykit.provenance import code_digest, freshness


@pytest.fixture
def fake_study(monkeypatch):
    """cli.main replaced: writes REPORT/summary.json (REPORT from the arguments, as the study would) and
    returns ``status[0]``; ``calls`` records the argument lists."""
    calls: list[list[str]] = []
    status = [0]

    def run(words):
        calls.append(list(words))
        if status[0] == 0:
            _, report = cli.folders(cli.build_parser().parse_args(words))
            report.mkdir(parents=True, exist_ok=True)
            (report / "summary.json").write_text(json.dumps({"study": "lm"}))
        return status[0]

    monkeypatch.setattr(cli, "main", run)
    return calls, status


def _made(summary: Path) -> dict:
    return json.loads(summary.read_text())["provenance"]


def test_a_study_stamps_its_report_and_keeps_the_record_for_report_only(tmp_path, fake_study, capsys):
    out, reports = tmp_path / "lm", tmp_path / "reports" / "lm-study"
    assert study.main(["lm", "--out", str(out), "--jobs", "2"]) == 0
    now = code_digest(study.ENTRY)["code_digest"]
    record = json.loads((out / study.RECORD).read_text())
    assert record["code_digest"] == now and record["entry"] == study.ENTRY
    assert record["command"] == f"gdro study lm --out {out} --jobs 2"
    assert record["settings"]["jobs"] == 2 and "out" not in record["settings"]
    assert _made(out / "report" / "summary.json")["code_digest"] == now

    words = ["lm", "--report-only", "--out", str(out), "--report", str(reports)]
    assert study.main(words) == 0
    made = _made(reports / "summary.json")
    assert made["code_digest"] == now
    assert made["command"] == f"gdro study lm --out {out} --jobs 2, then gdro study {' '.join(words)}"
    assert capsys.readouterr().err == ""


def test_code_changed_since_the_runs_the_report_names_the_runs_code_and_is_found_stale(tmp_path, monkeypatch,
                                                                                        fake_study, capsys):
    """The digest at the start is the one kept: code edited while the study ran (here: a digest that differs
    at the end) is said in one line, and the freshness test then asks for a rerun."""
    real = provenance.code_digest
    digests = iter(["0" * 64, "1" * 64])
    monkeypatch.setattr(provenance, "code_digest", lambda entries, root=provenance.ROOT: {
        **real(entries, root), "code_digest": next(digests)})
    out = tmp_path / "lm"
    assert study.main(["lm", "--out", str(out)]) == 0
    summary = out / "report" / "summary.json"
    assert _made(summary)["code_digest"] == "0" * 64
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "changed since its runs were made" in err[0] and "000000000000" in err[0]
    monkeypatch.setattr(provenance, "code_digest", real)
    assert "regenerate it with `gdro study lm --out" in freshness(summary)


def test_report_only_without_the_record_leaves_the_report_unstamped_in_one_line(tmp_path, fake_study, capsys):
    out, reports = tmp_path / "lm", tmp_path / "reports"
    (out / "runs").mkdir(parents=True)
    assert study.main(["lm", "--report-only", "--out", str(out), "--report", str(reports)]) == 0
    assert "provenance" not in json.loads((reports / "summary.json").read_text())
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "provenance.json is missing" in err[0]


def test_a_stopped_study_keeps_its_record_and_stamps_no_report(tmp_path, fake_study):
    """The record is written as the study starts, so a study stopped and started again (which reuses the
    runs it finished) still knows which code made them."""
    calls, status = fake_study
    status[0] = 2
    out = tmp_path / "lm"
    assert study.main(["lm", "--out", str(out)]) == 2
    assert calls and json.loads((out / study.RECORD).read_text())["code_digest"] == code_digest(study.ENTRY)["code_digest"]
    assert not (out / "report" / "summary.json").exists()


def _finished_run(out: Path, name: str = "grpo-s0") -> None:
    run = out / "runs" / name
    run.mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({"status": "finished"}))


def test_runs_reused_from_other_code_keep_that_codes_record(tmp_path, fake_study, capsys):
    """A study that starts again over runs finished by other code reuses them: the record and the report
    keep the older digest (one line says so) and the freshness test asks for a rerun."""
    out = tmp_path / "lm"
    assert study.main(["lm", "--out", str(out)]) == 0
    _finished_run(out)
    record = json.loads((out / study.RECORD).read_text())
    (out / study.RECORD).write_text(json.dumps({**record, "code_digest": "f" * 64}))
    capsys.readouterr()
    assert study.main(["lm", "--out", str(out)]) == 0
    summary = out / "report" / "summary.json"
    assert _made(summary)["code_digest"] == "f" * 64 == json.loads((out / study.RECORD).read_text())["code_digest"]
    err = capsys.readouterr().err
    assert "1 runs finished in" in err and "ffffffffffff" in err
    assert "regenerate it with" in freshness(summary)


def test_runs_reused_with_no_record_leave_the_code_unknown(tmp_path, fake_study, capsys):
    out = tmp_path / "lm"
    assert study.main(["lm", "--out", str(out)]) == 0
    _finished_run(out)
    (out / study.RECORD).unlink()
    assert study.main(["lm", "--out", str(out)]) == 0
    summary = out / "report" / "summary.json"
    assert _made(summary)["code_digest"] is None
    assert "code it has no record of" in capsys.readouterr().err
    assert "records no provenance" in freshness(summary)


def test_runs_reused_from_the_same_code_are_current(tmp_path, fake_study, capsys):
    out = tmp_path / "lm"
    assert study.main(["lm", "--out", str(out)]) == 0
    _finished_run(out)
    capsys.readouterr()
    assert study.main(["lm", "--out", str(out)]) == 0
    assert freshness(out / "report" / "summary.json") is None
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("words", [["lm"], ["lm", "--quick"], ["lm", "--small", "--report", "r"],
                                   ["lm", "--out", "o"], ["lm", "--out", "o", "--report", "p"]])
def test_the_folders_are_the_ones_the_study_writes(tmp_path, monkeypatch, words):
    """cli.folders, which gdro study's provenance reads, is where the study's own call writes."""
    from real_runs.lmstudy import pipeline
    seen = []
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(pipeline, "study_and_report", lambda cfg, out, report, **kw: seen.append((out, report))
                        or tmp_path / "report.md")
    assert cli.main(words) == 0
    assert seen == [cli.folders(cli.build_parser().parse_args(words))]


def test_gdro_study_runs_the_wrapper():
    from gdro_cli.main import COMMANDS
    assert COMMANDS["study"][0] == "gdro_cli.study_provenance"
