"""End to end: each study writes complete run directories and a report; the CLI fails in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gdro_lab import read_run
from gdro_lab.runlog import find_runs
from simulators import cli
from simulators.studies import curriculum

TINY = ["--seeds", "2", "--prompts", "400", "--batch", "32", "--no-progress"]


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def check_report(out: Path, figures: int) -> dict:
    report = (out / "report.md").read_text(encoding="utf-8")
    assert report.startswith("# Study") and "±" in report
    pngs = sorted(out.glob("fig_*.png"))
    assert len(pngs) >= figures and all(p.stat().st_size > 5000 for p in pngs)
    for png in pngs:
        assert f"({png.name})" in report
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))


def test_tiny_curriculum(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cur"
    code, stdout, _ = run_cli(["curriculum", "--out", str(out), "--steps", "40", "--methods",
                               "grpo,class_gdro,prompt_gdro,joint", *TINY], capsys)
    assert code == 0 and stdout.strip() == f"report: {(out / 'report.md').resolve()}"
    summary = check_report(out, 5)
    assert set(summary["metrics"]) == {"grpo", "class_gdro", "prompt_gdro", "joint"}
    runs = find_runs(out / "runs")
    assert len(runs) == 8
    for path in runs:
        run = read_run(path)
        assert run.meta["status"] == "finished" and len(run.steps) == 40 and run.evals
        assert run.snapshot_steps == ([40] if path.name == "seed0" else [])
    # Running again into the same folder replaces the simulator's own runs.
    assert run_cli(["curriculum", "--out", str(out), "--steps", "10", "--methods", "grpo", *TINY], capsys)[0] == 0
    assert len(find_runs(out / "runs")) == 2


def test_tiny_sqrt_law(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sqrt"
    code, _, _ = run_cli(["sqrt-law", "--out", str(out), "--steps", "40", "--methods", "grpo,rollout_gdro,sqrt_oracle",
                          *TINY], capsys)
    assert code == 0
    summary = check_report(out, 4)
    assert set(summary["worlds"]) == {"base", "bimodal"}
    assert len(find_runs(out / "runs")) == 12


def test_tiny_surrogate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sur"
    code, _, _ = run_cli(["surrogate", "--out", str(out), "--steps", "200", "--seeds", "2", "--prompts", "300",
                          "--batch", "40", "--no-progress"], capsys)
    assert code == 0
    summary = check_report(out, 1)
    assert summary["sandwich_violations"] == 0 and summary["gap_below_bound_everywhere"] is True
    assert len(find_runs(out / "runs")) == 2


@pytest.mark.slow
def test_tiny_ablation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "abl"
    code, _, _ = run_cli(["ablation", "--out", str(out), "--steps", "12", "--seeds", "2", "--prompts", "300",
                          "--batch", "32", "--no-progress"], capsys)
    assert code == 0
    summary = check_report(out, 1)
    assert len(summary["cells"]) == 64
    assert len(find_runs(out / "runs")) == 64 * 2 + 2


@pytest.mark.parametrize("args, needle", [
    (["nope"], "invalid choice"),
    (["--seeds", "0"], "--seeds"),
    (["--steps", "ten"], "--steps"),
    (["curriculum", "--batch", "500", "--prompts", "100"], "--batch"),
    (["curriculum", "--methods", "grpo,foo"], "foo"),
    (["curriculum", "--interference", "3", "--steps", "5", "--prompts", "100", "--batch", "10"], "interference"),
    (["curriculum", "--prompts", "10", "--batch", "10", "--steps", "5"], "num_prompts"),
    (["--bogus"], "unrecognized"),
])
def test_bad_arguments_are_one_line_errors(args: list[str], needle: str, capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    code, stdout, stderr = run_cli([*args, "--out", str(tmp_path / "x")], capsys)
    assert code == 2 and stdout == ""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gdro simulate: error:") and needle in lines[0]
    assert "Traceback" not in stderr


def test_foreign_files_are_never_deleted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stray = tmp_path / "runs" / "notes.txt"
    stray.parent.mkdir(parents=True)
    stray.write_text("mine")
    code, _, stderr = run_cli(["curriculum", "--out", str(tmp_path), "--steps", "5", "--methods", "grpo", *TINY], capsys)
    assert code == 2 and "not simulator runs" in stderr and stray.read_text() == "mine"


def test_help_and_default_study(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, _ = run_cli(["--help"], capsys)
    assert code == 0 and "sqrt-law" in stdout and "--seeds" in stdout
    seen = {}

    def fake_run(settings):
        seen["settings"] = settings
        return Path("reports/curriculum/report.md")

    monkeypatch.setattr(curriculum, "run", fake_run)
    code, stdout, _ = run_cli([], capsys)
    s = seen["settings"]
    assert code == 0 and "report:" in stdout
    assert (s.seeds, s.steps, s.prompts, s.batch, s.workers) == (5, 1000, 14116, 256, 2)
    assert s.out == Path("reports") / "curriculum" and s.methods == ()
