"""The LM study's wall time from its run folders: the union of the runs' own spans, so that a study
stopped and started again later does not count the time between its two sittings."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from real_runs.lmstudy import study_plan


def _covered(spans: list[tuple[float, float]]) -> float:
    """Brute force: the length covered on a grid of 1/8 (the spans' ends lie on it)."""
    grid = np.arange(0, 200, 0.125) + 0.0625
    return float(sum(any(low <= t <= high for low, high in spans) for t in grid) * 0.125)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 800), st.integers(0, 400)), max_size=8))
def test_union_length_counts_overlaps_once(starts: list[tuple[int, int]]) -> None:
    spans = [(a / 8, (a + b) / 8) for a, b in starts]
    assert study_plan.union_length(spans) == _covered(spans)


def _run(folder: Path, start: float, end: float) -> Path:
    folder.mkdir(parents=True)
    created = dt.datetime.fromtimestamp(start, tz=dt.timezone.utc).isoformat()
    (folder / "meta.json").write_text(json.dumps({"created": created}))
    (folder / "eval.jsonl").write_text("{}\n")
    os.utime(folder / "eval.jsonl", (end, end))
    return folder


def test_two_sittings_count_only_the_time_runs_ran(tmp_path: Path) -> None:
    t0 = 1_700_000_000.0
    runs = {"grpo": {0: _run(tmp_path / "a", t0, t0 + 600), 1: _run(tmp_path / "b", t0 + 300, t0 + 900)},
            # the second sitting, a day later
            "joint": {0: _run(tmp_path / "c", t0 + 86_400, t0 + 86_400 + 1_200)}}
    assert study_plan._span_seconds(runs) == 900 + 1_200, "two runs overlapping, then one a day later"


def test_an_unfinished_run_is_named_with_the_fix_and_never_deleted(tmp_path: Path) -> None:
    """A study (or arena) stopped mid-run leaves a folder its runs cannot resume (no checkpoint):
    run again, the study stops in one line that says to delete it, and deletes nothing itself."""
    import pytest

    from real_runs.lmstudy import learning_study, lm_arena

    cfg = learning_study.QUICK
    for target, call, command in [
            (tmp_path / learning_study.run_name("grpo", 0),
             lambda: learning_study.run_one(cfg, "grpo", 0, tmp_path, tmp_path / "warm"), "study"),
            (tmp_path / lm_arena.run_name("grpo", 1.0, 0),
             lambda: lm_arena.run_one(cfg, "grpo", 0, 1.0, tmp_path, tmp_path / "warm"), "arena")]:
        target.mkdir()
        (target / "meta.json").write_text(json.dumps({"status": "running"}))
        with pytest.raises(FileExistsError) as raised:
            call()
        message = str(raised.value)
        assert str(target) in message and "cannot be resumed" in message and "delete that folder" in message \
            and f"run the {command} again" in message and "--resume" not in message and "\n" not in message
        assert (target / "meta.json").is_file(), "the folder is the user's to delete"
