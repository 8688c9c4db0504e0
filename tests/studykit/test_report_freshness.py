"""Committed reports record the code that made them (studykit.provenance), and go stale loudly."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from studykit import provenance
from studykit.provenance import ROOT, STALE_LINE, closure, code_digest, committed_reports, freshness


def _tree(root: Path) -> Path:
    """A tiny project: simulators.study imports gdro_lab.core inside a function; gdro_lab.other is unused."""
    for name, text in {
        "gdro_lab/__init__.py": "",
        "gdro_lab/core.py": "def f():\n    return 1\n",
        "gdro_lab/other.py": "X = 1\n",
        "simulators/__init__.py": "",
        "simulators/study.py": "import json\n\ndef run():\n    from gdro_lab.core import f\n    return f()\n",
        "simulators/helper.py": "from . import study\n",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_closure_follows_function_level_and_relative_imports(tmp_path):
    root = _tree(tmp_path)
    names = {p.relative_to(root).as_posix() for p in closure(["simulators.helper"], root)}
    assert names == {"simulators/__init__.py", "simulators/helper.py", "simulators/study.py",
                     "gdro_lab/__init__.py", "gdro_lab/core.py"}


def test_digest_changes_with_a_dependency_and_only_then(tmp_path):
    root = _tree(tmp_path)
    before = code_digest(["simulators.study"], root)["code_digest"]
    (root / "gdro_lab/other.py").write_text("X = 2\n")  # not imported: same digest
    assert code_digest(["simulators.study"], root)["code_digest"] == before
    (root / "gdro_lab/core.py").write_text("def f():\n    return 2\n")
    assert code_digest(["simulators.study"], root)["code_digest"] != before


def test_closure_holds_every_project_module_an_import_loads():
    """Reference: the project modules Python really loads when it imports the study (sys.modules)."""
    entry = "simulators.studies.curriculum_study"
    code = (f"import sys, {entry}; loaded = list(sys.modules); from studykit.provenance import module_file; "
            "print('\\n'.join(str(module_file(m)) for m in loaded if module_file(m)))")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert set(map(Path, loaded.stdout.split())) <= set(closure([entry]))


def _report(root: Path, text: str = "# Study\n\nnumbers\n") -> Path:
    folder = root / "reports" / "study"
    folder.mkdir(parents=True)
    (folder / "report.md").write_text(text)
    summary = folder / "summary.json"
    summary.write_text(json.dumps({"study": "x"}))
    return summary


def test_a_report_goes_stale_when_its_code_changes(tmp_path):
    root = _tree(tmp_path)
    summary = _report(root)
    assert "no provenance" in freshness(summary, root)
    block = {**code_digest(["simulators.study"], root), "command": "gdro simulate", "settings": {}}
    provenance.add_provenance(summary, block)
    assert freshness(summary, root) is None
    (root / "gdro_lab/core.py").write_text("def f():\n    return 3\n")  # the planted change
    problem = freshness(summary, root)
    assert problem is not None and "regenerate it with `gdro simulate`" in problem


def test_a_stale_report_must_say_so_in_its_json_and_its_page(tmp_path):
    root = _tree(tmp_path)
    summary = _report(root)
    block = {**code_digest(["simulators.study"], root), "command": "gdro simulate"}
    (root / "gdro_lab/core.py").write_text("def f():\n    return 3\n")
    provenance.add_provenance(summary, {**block, "stale": {"commit": "abc1234", "reason": "kept"}})
    assert "no '**Stale report**' note" in freshness(summary, root)
    (summary.parent / "report.md").write_text(f"# Study\n\n{STALE_LINE}: made at abc1234.\n")
    assert freshness(summary, root) is None
    provenance.add_provenance(summary, {**block, "stale": {"reason": "kept"}})  # no commit: not accepted
    assert "changed since it was made" in freshness(summary, root)


def test_a_report_whose_study_module_was_renamed_is_stale_in_one_line(tmp_path):
    """A module renamed after the report was made: flagged (never a traceback), accepted once marked stale."""
    root = _tree(tmp_path)
    summary = _report(root)
    block = {**code_digest(["simulators.study"], root), "command": "gdro simulate"}
    provenance.add_provenance(summary, block)
    (root / "simulators/study.py").rename(root / "simulators/study_renamed.py")
    problem = freshness(summary, root)
    assert problem is not None and "simulators.study no longer exists" in problem and "`gdro simulate`" in problem
    provenance.add_provenance(summary, {**block, "stale": {"commit": "abc1234", "reason": "renamed"}})
    (summary.parent / "report.md").write_text(f"# Study\n\n{STALE_LINE}: made at abc1234.\n")
    assert freshness(summary, root) is None


def test_mark_stale_records_the_commit_digest_and_the_note(tmp_path):
    """The digest of a commit's code is the digest of that commit's files (here: HEAD of a copy)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a checkout")
    root = _tree(tmp_path)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "gdro_lab", "simulators"], cwd=root, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"], cwd=root, check=True)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    expected = code_digest(["simulators.study"], root)["code_digest"]
    (root / "gdro_lab/core.py").write_text("def f():\n    return 4\n")  # the tree moves on
    summary = _report(root)
    block = provenance.mark_stale(summary, ["simulators.study"], "gdro simulate", head, "too slow", root)
    assert block["code_digest"] == expected
    page = (summary.parent / "report.md").read_text()
    assert page.startswith("# Study\n\n" + STALE_LINE) and head in page and expected[:12] in page
    provenance.mark_stale(summary, ["simulators.study"], "gdro simulate", head, "too slow", root)
    assert (summary.parent / "report.md").read_text() == page  # marking twice writes one note
    assert freshness(summary, root) is None


def test_every_committed_report_is_current_or_says_it_is_stale():
    reports = committed_reports()
    assert len(reports) >= 20, "reports/ lost a report: update the count only if one was removed on purpose"
    problems = [p for p in map(freshness, reports) if p]
    assert not problems, "\n".join(problems)


def test_no_committed_report_escapes_the_check():
    """Every folder of reports/ that holds results (a .json or .md file) is a report the check reads, or lies
    inside one (a calibration's predict/ folder): a report written without provenance is found, not skipped."""
    covered = {path.parent for path in committed_reports()}
    folders = {path.parent for path in (ROOT / "reports").rglob("*") if path.suffix in (".json", ".md")}
    loose = sorted(folder.relative_to(ROOT).as_posix() for folder in folders
                   if not any(folder == c or c in folder.parents for c in covered))
    assert not loose, f"report folders without provenance (no summary.json or results file): {loose}"


def test_no_committed_report_records_a_machine_local_path():
    for path in committed_reports():
        block = json.loads(path.read_text()).get("provenance", {})
        text = json.dumps(block) + path.read_text()
        assert "/tmp/" not in text and "/home/" not in text and "/work/" not in text, path


def test_a_tool_records_a_command_anyone_can_rerun(tmp_path, monkeypatch):
    """provenance.portable, shared by the calibration tools: --out outside the checkout is OUT, inside it
    relative to the checkout's root (also when given relative to another folder); scratch flags dropped."""
    from studykit.provenance import portable
    assert portable(["--out", str(tmp_path), "--reps", "1"]) == ["--out", "OUT", "--reps", "1"]
    assert portable([f"--out={tmp_path / 'x'}", "--reps=1"]) == ["--out=OUT", "--reps=1"]
    assert portable([f"--out={ROOT / 'reports/calibration/recovery'}"]) == ["--out=reports/calibration/recovery"]
    monkeypatch.chdir(ROOT / "docs")
    assert portable(["--draws", "2", "--out", "../reports/x", "--seeds", "1"]) == \
        ["--draws", "2", "--out", "reports/x", "--seeds", "1"]
    assert portable(["--work", str(tmp_path), "--out", str(tmp_path), "--work=/w", "-v"], drop=("--work",)) == \
        ["--out", "OUT", "-v"]
    assert portable(["--output", str(tmp_path)]) == ["--output", str(tmp_path)]  # only --out itself
    # one machine's flags of gdro simulate and gdro arena: --out dropped (the report is copied), switches alone
    assert portable(["--out", "x", "--progress", "--workers=2", "--no-progress", "--jobs", "3", "--seeds", "2"],
                    drop=("--out", "--workers", "--jobs"), switches=("--progress", "--no-progress")) == ["--seeds", "2"]


def test_a_report_of_rows_made_by_older_code_keeps_their_digest():
    """provenance.rows_provenance: the block when every row was made by its code; else the older digest (with the
    earlier block's stale record), a row without a digest counting as made by the earlier block's code."""
    import argparse

    from studykit.provenance import rows_provenance, settings_of
    block = {"entry": ["m"], "code_digest": "new", "files": 3, "command": "c --more", "settings": {"reps": 2}}
    earlier = {"entry": ["m"], "code_digest": "old", "files": 2, "command": "c", "stale": {"commit": "abc"}}
    assert rows_provenance(block, earlier, [{"code_digest": "new"}] * 2) == (block, None)  # all remade
    assert rows_provenance(block, {**earlier, "code_digest": "new"}, [{}, {"code_digest": "new"}]) == (block, None)
    for rows in ([{}, {"code_digest": "new"}], [{"code_digest": "old"}, {"code_digest": "new"}]):
        kept, note = rows_provenance(block, earlier, rows)
        assert kept == {**block, "code_digest": "old", "files": 2, "stale": {"commit": "abc"}}, rows
        assert note is not None and "\n" not in note and "stale" in note and "old" in note
    kept, note = rows_provenance(block, earlier, [{"code_digest": "older"}, {"code_digest": "new"}])
    assert kept == {**block, "code_digest": "older", "files": None} and note is not None
    for missing in (None, {"entry": ["m"]}):  # rows from before the folder recorded its code
        unknown, note = rows_provenance(block, missing, [{}, {"code_digest": "new"}])
        assert unknown["code_digest"] is None and note is not None
    args = argparse.Namespace(out=Path("/x"), samples=[Path("a"), Path("b")], lr=None, work=Path("w"))
    assert settings_of(args, drop=("out", "work")) == {"lr": None, "samples": ["a", "b"]}


def test_gdro_simulate_writes_the_provenance_of_its_report(tmp_path, capsys):
    from simulators.cli import main
    out = tmp_path / "run"
    argv = ["--out", str(out), "--seeds", "2", "--steps", "4", "--prompts", "120", "--batch", "8",
            "--lr-grid", "1", "--eval-every", "2", "--no-progress"]
    assert main(argv) == 0
    block = json.loads((out / "summary.json").read_text())["provenance"]
    assert block["code_digest"] == code_digest(["simulators.studies.curriculum_study", "simulators.cli"])["code_digest"]
    assert block["command"] == "gdro simulate --seeds 2 --steps 4 --prompts 120 --batch 8 --lr-grid 1 --eval-every 2"
    assert block["settings"]["steps"] == 4 and block["settings"]["lr_grid"] == [1.0]
    assert "out" not in block["settings"] and str(tmp_path) not in json.dumps(block)


def test_gdro_sweep_writes_the_provenance_of_its_report(tmp_path, capsys):
    from simulators.knob_sweep import main
    argv = ["--grid", "world.transfer=0,1", "--methods", "grpo", "--seeds", "1", "--steps", "4",
            "--prompts", "120", "--batch", "8", "--workers", "1", "--no-progress", "--out", str(tmp_path / "sweep")]
    assert main(argv) == 0
    block = json.loads((tmp_path / "sweep" / "summary.json").read_text())["provenance"]
    assert block["code_digest"] == code_digest(["simulators.knob_sweep", "simulators.cli"])["code_digest"]
    assert block["command"] == ("gdro sweep --grid world.transfer=0,1 --methods grpo --seeds 1 --steps 4 "
                                "--prompts 120 --batch 8")
    assert block["settings"]["grid"] == ["world.transfer=0,1"] and str(tmp_path) not in json.dumps(block)
