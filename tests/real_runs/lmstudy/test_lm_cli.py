"""`gdro study lm`'s folders under the write policy (gdro_lab/runformat/output.py): a folder of the
user's files is refused in one line before any compute and left byte for byte as it was; the study's
own folders (its marker, or its layout from before the marker) are welcome; the folder is the first line."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from gdro_lab._validate import ConfigError
from gdro_lab.runformat.output import MARKER, owners
from real_runs.lmstudy import cli


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("flags", [["--out", "{mine}"], ["--out", "{new}", "--report", "{mine}"],
                                   ["--calibration-data", "{mine}"], ["--report-only", "--out", "{new}", "--report", "{mine}"]])
def test_a_folder_of_the_users_files_is_refused_and_kept(flags: list[str], tmp_path: Path, capsys) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "report.md").write_text("# my notes\n")
    (mine / "summary.json").write_bytes(b'{"mine": true}\n')
    before = _digest(mine)
    argv = ["lm", "--quick"] + [f.format(mine=mine, new=tmp_path / "new") for f in flags]
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    flag = flags[flags.index("{mine}") - 1]
    assert captured.err == (f"gdro study lm: {flag} {mine} holds files gdro study did not write (report.md, 2 entries "
                            "in all): give a new or empty folder, or one gdro study wrote (nothing was written)\n")
    assert captured.out == ""
    assert _digest(mine) == before and sorted(p.name for p in mine.iterdir()) == ["report.md", "summary.json"]
    assert not (tmp_path / "new").exists()  # nothing claimed before every folder was checked


def test_the_studys_own_folders_are_welcome(tmp_path: Path) -> None:
    """A folder it claimed (the marker) and one it wrote before the marker (runs/, initial/, report/ only;
    a report folder with the study's report.md and slips.json, such as the committed reports/lm-study)."""
    out, report, calib = tmp_path / "out", tmp_path / "rep", tmp_path / "calib"
    cli.claim_folders({"--out": out, "--report": out / "report"})
    assert owners(out) == {"gdro study"} and owners(out / "report") == {"gdro study"}
    cli.claim_folders({"--out": out, "--report": out / "report"})  # a rerun
    (out / MARKER).unlink()
    (out / "runs").mkdir()
    (out / "initial").mkdir()
    cli.claim_folders({"--out": out})
    report.mkdir()
    (report / "report.md").write_text("# A learning study on CPU (quick)\n")
    (report / "slips.json").write_text("{}")
    (report / "README.md").write_text("notes")
    cli.claim_folders({"--report": report})
    calib.mkdir()
    (calib / "sweep").mkdir()
    (calib / "calibration-data.json").write_text("{}")
    cli.claim_folders({"--calibration-data": calib})
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "runs").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="--out .*other holds files gdro study did not write"):
        cli.claim_folders({"--out": tmp_path / "other"})
    assert not (tmp_path / "other" / MARKER).exists()


def test_the_folders_are_the_first_line(tmp_path: Path, monkeypatch, capsys) -> None:
    from real_runs.lmstudy import pipeline

    def study_and_report(cfg, out, report_dir, setting, report_only):
        print("study: running")
        report_dir.mkdir(parents=True, exist_ok=True)
        (report_dir / "report.md").write_text("# A learning study on CPU\n")
        return report_dir / "report.md"

    monkeypatch.setattr(pipeline, "study_and_report", study_and_report)
    assert cli.main(["lm", "--quick", "--out", str(tmp_path / "s")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"gdro study lm: writing to {tmp_path / 's'} (--out), {tmp_path / 's' / 'report'} (--report)"
    assert lines[1] == "study: running"
