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


def test_a_counter_prints_zero_first_then_each_count_with_the_time_left() -> None:
    """0/N before any item (a long first item is not silent), then per item the count, the time so far
    and the estimate (time per item x items left) from an injected clock; none left at N/N."""
    from real_runs.progress import Counter, duration

    now = [100.0]
    lines: list[str] = []
    counter = Counter("lm arena", 4, "runs", out=lines.append, prefix="", clock=lambda: now[0])
    counter.start("2 at a time")
    now[0] += 30.0
    counter.advance(1, "grpo")
    now[0] += 330.0
    counter.advance(2)
    now[0] += 60.0
    counter.advance(1)
    assert lines == ["lm arena: 0/4 runs (2 at a time)",
                     "lm arena: 1/4 runs, 30 s so far, about 90 s left (grpo)",
                     "lm arena: 3/4 runs, 6 min so far, about 2 min left",
                     "lm arena: 4/4 runs, 7 min so far"]
    assert [duration(s) for s in (0.4, 119, 120, 7199, 7200)] == ["0 s", "119 s", "2 min", "120 min", "2.0 h"]


def test_the_heartbeat_interval_is_read_when_a_phase_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test (or a caller) lowers progress.EVERY_S to see a heartbeat without a long phase: the
    heartbeat thread waits exactly that interval (its waits recorded), and a beat comes."""
    from real_runs import progress

    waits: list[float] = []

    class Recorded(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            if timeout is not None:
                waits.append(timeout)
            return super().wait(timeout)

    beat = threading.Event()  # the test's own, made before the recording one is put in
    monkeypatch.setattr(progress, "EVERY_S", 0.01)
    monkeypatch.setattr(progress.threading, "Event", Recorded)
    lines: list[str] = []

    def out(line: str) -> None:
        lines.append(line)
        if "still running" in line:
            beat.set()

    with progress.phase("load", out=out):
        assert beat.wait(600), lines
    assert set(waits) == {0.01}, waits
