"""real_runs.progress.phase: a start line, heartbeats while the phase runs, and its end."""

from __future__ import annotations

import re
import threading
import time

import pytest

from real_runs.progress import phase


def test_a_phase_announces_itself_beats_and_ends() -> None:
    """The block runs until three heartbeats have come (however long a loaded machine takes: the wait is for the
    outcome, its limit only guards a hang); then the end line, and no heartbeat thread outlives the phase."""
    lines: list[str] = []
    three = threading.Event()

    def out(line: str) -> None:
        lines.append(line)
        if sum("still running" in x for x in lines) >= 3:
            three.set()

    with phase("generate 1,024 rollouts", every_s=0.05, out=out):
        assert three.wait(600), lines
    assert lines[0] == "gdro: generate 1,024 rollouts started"
    beats = lines[1:-1]
    assert len(beats) >= 3, lines
    assert all(re.fullmatch(r"gdro: generate 1,024 rollouts still running after \d+ s", b) for b in beats), beats
    assert re.fullmatch(r"gdro: generate 1,024 rollouts done in \d+ s", lines[-1])
    assert not [t for t in threading.enumerate() if t.name == "progress: generate 1,024 rollouts"]
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
