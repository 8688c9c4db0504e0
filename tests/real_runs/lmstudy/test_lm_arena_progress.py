"""`gdro arena`'s progress: the output folder first, then the LM part's runs counted (done/total, the
time so far, an estimate of the time left) as each finishes. No training: the runs are stand-ins."""

from __future__ import annotations

import io
import re
import sys
from concurrent.futures import Future
from pathlib import Path

import pytest

from real_runs.lmstudy import lm_arena


def _done(path: str) -> Future[str]:
    future: Future[str] = Future()
    future.set_result(path)
    return future


def test_each_finished_run_advances_the_count_to_total_with_an_estimate() -> None:
    now = [0.0]
    lines: list[str] = []

    def log(line: str) -> None:
        lines.append(line)
        now[0] += 60.0  # each line a minute after the last: the estimate follows

    keys = [("grpo", 1.0, 0), ("knapsack", 1.0, 0), ("grpo", 0.5, 1)]
    futures = {key: _done(f"runs/{key[0]}-{key[2]}") for key in keys}
    runs = lm_arena.counted(futures, log, "2 at a time", clock=lambda: now[0])
    assert runs == {key: Path(f"runs/{key[0]}-{key[2]}") for key in keys}
    assert lines[0] == "lm arena: 0/3 runs (2 at a time)"
    assert [line.split(",")[0] for line in lines[1:]] == ["lm arena: 1/3 runs", "lm arena: 2/3 runs",
                                                         "lm arena: 3/3 runs"]
    finished = r" \((grpo lr 1 seed 0|knapsack lr 1 seed 0|grpo lr 0\.5 seed 1)\)"
    assert re.fullmatch(r"lm arena: 1/3 runs, 60 s so far, about 2 min left" + finished, lines[1]), lines
    assert re.fullmatch(r"lm arena: 2/3 runs, 2 min so far, about 60 s left" + finished, lines[2]), lines
    assert "left" not in lines[3] and lines[3].startswith("lm arena: 3/3 runs, 3 min so far"), lines


def test_a_failed_run_stops_the_count_with_its_error() -> None:
    failed: Future[str] = Future()
    failed.set_exception(FileExistsError("runs/x holds an unfinished run"))
    lines: list[str] = []
    with pytest.raises(FileExistsError, match="unfinished"):
        lm_arena.counted({("grpo", 1.0, 0): failed}, lines.append)
    assert lines == ["lm arena: 0/1 runs"]


def test_gdro_arena_prints_its_folder_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The folder line comes before the LM part's first line (stdout and stderr read as one stream)."""
    from gdro_cli import arena as arena_cli
    merged = io.StringIO()
    monkeypatch.setattr(sys, "stdout", merged)
    monkeypatch.setattr(sys, "stderr", merged)

    def fake_lm(out: Path, **kwargs) -> Path:
        print("lm arena: 0/30 runs (2 at a time)")
        (out / "lm-arena.json").write_text("{}")
        return out / "lm-arena.json"

    monkeypatch.setattr(lm_arena, "main_arena", fake_lm)
    monkeypatch.setattr(arena_cli, "run_simulator", lambda args, made=None: 0)
    out = tmp_path / "arena"
    assert arena_cli.main(["--quick", "--out", str(out)]) == 0
    lines = merged.getvalue().splitlines()
    assert lines[0] == (f"gdro arena: writing to {out.resolve()} (the LM part (a line per run done), then the "
                        "simulator part)")
    assert lines[1] == "lm arena: 0/30 runs (2 at a time)"
