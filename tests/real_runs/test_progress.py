"""real_runs.progress.phase: a start line, heartbeats while the phase runs, and its end."""

from __future__ import annotations

import re
import time

import pytest

from real_runs.progress import phase


def test_a_phase_announces_itself_beats_and_ends() -> None:
    lines: list[str] = []
    with phase("generate 1,024 rollouts", every_s=0.05, out=lines.append):
        time.sleep(0.32)
    assert lines[0] == "gdro: generate 1,024 rollouts started"
    beats = lines[1:-1]
    assert 3 <= len(beats) <= 7, lines
    assert all(re.fullmatch(r"gdro: generate 1,024 rollouts still running after \d+ s", b) for b in beats), beats
    assert re.fullmatch(r"gdro: generate 1,024 rollouts done in \d+ s", lines[-1])
    count = len(lines)
    time.sleep(0.15)
    assert len(lines) == count, "a heartbeat after the phase ended"


def test_a_failing_phase_says_so_and_the_error_propagates() -> None:
    lines: list[str] = []
    with pytest.raises(RuntimeError, match="boom"):
        with phase("load", every_s=10.0, out=lines.append):
            raise RuntimeError("boom")
    assert lines[0] == "gdro: load started" and re.fullmatch(r"gdro: load failed after \d+ s", lines[-1])
    assert len(lines) == 2


def test_the_default_goes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    with phase("eval", every_s=10.0):
        pass
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.splitlines() == ["gdro: eval started", "gdro: eval done in 0 s"]
