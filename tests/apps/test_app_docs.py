"""docs/app.md is code: its commands run, and the numbers it states are the app's."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from apps import launch
from apps.data import pins, study
from apps.views import interactive

DOC = Path(__file__).resolve().parents[2] / "docs" / "app.md"


def _commands() -> list[str]:
    blocks = re.findall(r"```(?:bash)?\n(.*?)```", DOC.read_text(), flags=re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_the_app_command_of_the_docs_runs(tmp_path: Path, monkeypatch, capsys) -> None:
    """Run where the docs' earlier commands left their runs (./gdro-runs): the folder is the app's root
    (a missing one is passed on as a run folder, which the app names as missing)."""
    commands = [command for command in _commands() if command.startswith("gdro app")]
    assert commands == ["gdro app gdro-runs", "gdro app gdro-runs --list-runs"], commands
    assert [command.split()[:2] for command in _commands()] == [["gdro", "app"]] * 2 + [["gdro", "report"]], \
        "the page's commands: the app, what it lists, then its static figures (run by scripts/doc_commands.py)"
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert launch.main([*commands[0].split()[2:], "--print-command"]) == 0
    assert f"-- --root {tmp_path / 'runs'} {tmp_path / 'gdro-runs'}" in capsys.readouterr().out
    (tmp_path / "gdro-runs" / "study").mkdir(parents=True)
    assert launch.main([*commands[0].split()[2:], "--print-command"]) == 0
    assert f"-- --root {tmp_path / 'gdro-runs'}" in capsys.readouterr().out
    assert launch.main(commands[1].split()[2:]) == 0
    assert capsys.readouterr().out.strip() == "0 runs listed under gdro-runs"


def test_the_benchmark_command_of_the_docs_is_valid() -> None:
    """The app's speed section's command (a benchmark of minutes, not run here): its options exist."""
    text = (DOC.parent / "measurements-app.md").read_text()
    assert "`benchmarks/bench_app.py --only root100`" in text
    bench = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_app.py"
    shown = subprocess.run([sys.executable, str(bench), "--help"], capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0 and "root100" in shown.stdout and "--load" in shown.stdout


def test_the_numbers_the_docs_state_are_the_apps() -> None:
    text = DOC.read_text()
    assert f"Up to {interactive.LEGEND_MAX} series" in text and f"more than {interactive.LEGEND_MAX}" in text
    assert f"A name longer than {interactive.LEGEND_CHARS} characters is cut in its middle" in text
    from apps.data import colours

    assert f"**Up to {colours.MAX_STYLES} groups are told apart by colour and dash.**" in text
    from apps.views import uicharts

    assert f"a row of charts is at most {uicharts.ROW_PX} px" in text
    assert f"**Bands\nneed at least {study.MIN_BAND_SEEDS} seeds.**" in text or \
        f"need at least {study.MIN_BAND_SEEDS} seeds" in text
    assert "`~/.local/state/gdro-lab/pins.json`" in text
    assert pins.pins_path({"HOME": "/h"}).name == "pins.json"
    assert str(pins.state_dir({})).endswith(".local/state/gdro-lab")
