"""Tests of gdro_lab.runformat.runlog: the run directory format (docs/run-format.md)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from gdro_lab.runformat.runlog import (FORMAT_VERSION, RunFormatError, RunWriter, find_runs, is_run_dir, load_snapshot,
                                       read_run)

NUM_BINS = 3


def one_line_error(info: pytest.ExceptionInfo) -> str:
    message = str(info.value)
    assert "\n" not in message and message.strip()
    return message


def write_run(path: Path, steps=range(5), close: bool = True) -> RunWriter:
    writer = RunWriter(path, {"lr": 1e-6, "edges": [0.1, 0.5], "nan": float("nan")}, NUM_BINS, "test",
                       bin_labels=["hard", "mid", "easy"])
    for t in steps:
        writer.log_step(t, {"mean_success": 0.1 * t, "mu": np.float32(t), "missing": None,
                            "nan": float("nan") if t == 2 else 1.0},
                        {"share": np.array([0.5, 0.25, 0.25]), "weight": [t, np.nan, 1.0]})
    if close:
        writer.close()
    return writer


def tree_bytes(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


# ----------------------------------------------------------------------------- round trip

def test_write_read_round_trip(tmp_path):
    run_dir = tmp_path / "run"
    writer = RunWriter(run_dir, {"lr": 1e-6, "edges": (0.1, 0.5), "nan": float("nan")}, NUM_BINS, "test",
                       bin_labels=["hard", "mid", "easy"])
    for t in range(4):
        writer.log_step(t, {"mean_success": 0.1 * t, "mu": np.float32(0.5), "count": np.int64(t),
                            "gap": float("nan") if t == 2 else -1.5},
                        {"share": np.array([0.5, 0.25, 0.25]), "weight": [float(t), np.nan, 1.0]})
    writer.log_step(4, {"late_only": 3.0}, {"count": np.array([1, 2, 3])})
    writer.log_eval(0, {"accuracy": 0.5, "pass@8": np.float64(np.nan)})
    writer.log_eval(4, {"accuracy": 0.75})
    writer.close()

    run = read_run(run_dir)
    assert run.meta["format"] == "gdro-run" and run.meta["version"] == FORMAT_VERSION
    assert run.meta["status"] == "finished" and run.meta["producer"] == "test"
    assert run.meta["bin_labels"] == ["hard", "mid", "easy"] and run.num_bins == NUM_BINS
    assert run.name == "run"
    assert run.config == {"lr": 1e-6, "edges": [0.1, 0.5], "nan": None}
    assert run.steps.tolist() == [0, 1, 2, 3, 4] and run.steps.dtype == np.int64
    np.testing.assert_allclose(run.scalars["mean_success"], [0.0, 0.1, 0.2, 0.3, np.nan])
    np.testing.assert_allclose(run.scalars["mu"], [0.5] * 4 + [np.nan])
    np.testing.assert_array_equal(run.scalars["gap"], [-1.5, -1.5, np.nan, -1.5, np.nan])  # NaN -> null -> NaN
    np.testing.assert_array_equal(run.scalars["late_only"], [np.nan] * 4 + [3.0])
    assert run.bins["share"].shape == (5, NUM_BINS) and run.bins["weight"].shape == (5, NUM_BINS)
    np.testing.assert_allclose(run.bins["share"][:4], [[0.5, 0.25, 0.25]] * 4)
    assert np.isnan(run.bins["share"][4]).all()
    np.testing.assert_array_equal(run.bins["weight"][:, 1], [np.nan] * 5)
    np.testing.assert_array_equal(run.bins["weight"][:4, 0], [0, 1, 2, 3])
    np.testing.assert_array_equal(run.bins["count"][4], [1, 2, 3])
    assert [e["step"] for e in run.evals] == [0, 4]
    assert run.evals[0]["metrics"] == {"accuracy": 0.5, "pass@8": None}
    assert run.torn_tail is False and run.snapshot_steps == []
    # NaN is written as JSON null, never as the non-standard NaN token
    text = (run_dir / "steps.jsonl").read_text()
    assert "NaN" not in text and "null" in text
    assert all(json.loads(line)["step"] == i for i, line in enumerate(text.splitlines()))


def test_snapshot_round_trip_with_arrays_and_generator(tmp_path):
    rng = np.random.default_rng(1234)
    rng.random(17)  # advance into the stream
    mt = np.random.Generator(np.random.MT19937(5))
    state = {
        "float64": np.array([[1.0, np.nan], [np.inf, -np.inf]]),
        "float32": np.array([0.1, 1e-30, 3.4e38], np.float32),
        "float16": np.array([0.1, 65504.0], np.float16),
        "int64": np.array([-(2**62), 0, 2**62], np.int64),
        "uint64": np.array([2**64 - 1, 0], np.uint64),
        "int8": np.arange(-3, 3, dtype=np.int8).reshape(2, 3),
        "bool": np.array([True, False, True]),
        "empty": np.zeros((0, 4)),
        "scalar": np.float64(np.nan),
        "py_nan": float("nan"),
        "py_inf": float("-inf"),
        "ids": ["a", "b"],
        "nested": {"x": 1, "y": None, "z": np.int32(7)},
        "rng": rng.bit_generator.state,
        "mt": mt.bit_generator.state,
    }
    with RunWriter(tmp_path / "run", {}, NUM_BINS, "test") as writer:
        writer.save_snapshot(3, {"classifier": state})
        writer.save_snapshot(7, {"classifier": {"step": 7}})
    assert read_run(tmp_path / "run").snapshot_steps == [3, 7]
    step, loaded = load_snapshot(tmp_path / "run", 3)
    assert step == 3
    got = loaded["classifier"]
    for name in ("float64", "float32", "float16", "int64", "uint64", "int8", "bool", "empty"):
        assert isinstance(got[name], np.ndarray), name
        assert got[name].dtype == state[name].dtype, name
        assert got[name].shape == state[name].shape, name
        np.testing.assert_array_equal(got[name], state[name])
    assert math.isnan(got["scalar"]) and math.isnan(got["py_nan"]) and got["py_inf"] == -math.inf
    assert got["ids"] == ["a", "b"] and got["nested"] == {"x": 1, "y": None, "z": 7}
    # the restored generators continue the stream exactly
    restored = np.random.default_rng(0)
    restored.bit_generator.state = got["rng"]
    np.testing.assert_array_equal(restored.random(50), rng.random(50))
    np.testing.assert_array_equal(restored.integers(0, 2**63, 20), rng.integers(0, 2**63, 20))
    restored_mt = np.random.Generator(np.random.MT19937(0))
    restored_mt.bit_generator.state = got["mt"]
    np.testing.assert_array_equal(restored_mt.random(50), mt.random(50))
    assert load_snapshot(tmp_path / "run") == (7, {"classifier": {"step": 7}})  # latest by default


def test_load_snapshot_errors(tmp_path):
    write_run(tmp_path / "run")
    with pytest.raises(RunFormatError) as info:
        load_snapshot(tmp_path / "run")
    one_line_error(info)
    with RunWriter.resume(tmp_path / "run", 4) as writer:
        writer.save_snapshot(2, {"a": 1})
    with pytest.raises(RunFormatError) as info:
        load_snapshot(tmp_path / "run", 3)
    assert "3" in one_line_error(info)


# ----------------------------------------------------------------------------- crash safety

def test_torn_last_line_is_dropped(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir)
    with open(run_dir / "steps.jsonl", "ab") as handle:
        handle.write(b'{"step": 5, "scalars": {"mean_su')
    run = read_run(run_dir)
    assert run.torn_tail is True
    assert run.steps.tolist() == [0, 1, 2, 3, 4]
    np.testing.assert_allclose(run.scalars["mean_success"], [0.0, 0.1, 0.2, 0.3, 0.4])


def test_unparseable_terminated_last_line_is_dropped(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir)
    with open(run_dir / "steps.jsonl", "ab") as handle:
        handle.write(b'{"step": 5, "sca\n')
    run = read_run(run_dir)
    assert run.torn_tail is True and run.steps.tolist() == [0, 1, 2, 3, 4]


def test_clean_run_has_no_torn_tail_and_blank_lines_are_skipped(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir)
    assert read_run(run_dir).torn_tail is False
    with open(run_dir / "steps.jsonl", "ab") as handle:
        handle.write(b"\n")
    run = read_run(run_dir)
    assert run.torn_tail is False and run.steps.size == 5


@pytest.mark.parametrize("bad", [b"{not json", b"[1, 2]", b'{"scalars": {}}', b"\xff\xfe"])
def test_corrupt_middle_line_names_file_and_line(tmp_path, bad):
    run_dir = tmp_path / "run"
    write_run(run_dir)
    lines = (run_dir / "steps.jsonl").read_bytes().split(b"\n")
    lines[2] = bad
    (run_dir / "steps.jsonl").write_bytes(b"\n".join(lines))
    with pytest.raises(RunFormatError) as info:
        read_run(run_dir)
    message = one_line_error(info)
    assert "steps.jsonl" in message and "line 3" in message


def test_corrupt_line_before_a_torn_tail_is_an_error(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir)
    with open(run_dir / "steps.jsonl", "ab") as handle:
        handle.write(b'{corrupt\n{"step": 6, "scal')  # line 6 is damaged, line 7 is the torn tail
    with pytest.raises(RunFormatError) as info:
        read_run(run_dir)
    assert "line 6" in one_line_error(info)


def test_corrupt_eval_line_is_an_error_too(tmp_path):
    run_dir = tmp_path / "run"
    writer = write_run(run_dir, close=False)
    for t in range(3):
        writer.log_eval(t, {"accuracy": 0.5})
    writer.close()
    lines = (run_dir / "eval.jsonl").read_text().splitlines()
    lines[0] = "garbage"
    (run_dir / "eval.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(RunFormatError) as info:
        read_run(run_dir)
    assert "eval.jsonl" in one_line_error(info) and "line 1" in str(info.value)


# ----------------------------------------------------------------------------- meta and versions

def test_newer_version_asks_to_upgrade(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir)
    meta = json.loads((run_dir / "meta.json").read_text())
    meta["version"] = FORMAT_VERSION + 1
    (run_dir / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(RunFormatError) as info:
        read_run(run_dir)
    assert "upgrade" in one_line_error(info)
    assert not is_run_dir(run_dir)


@pytest.mark.parametrize("meta_text", [
    "{broken",
    json.dumps({"format": "something-else", "version": 1, "num_bins": 3}),
    json.dumps({"format": "gdro-run", "version": 1, "num_bins": 0}),
    json.dumps({"format": "gdro-run", "version": 1}),
    json.dumps(["gdro-run"]),
])
def test_damaged_meta_is_an_error(tmp_path, meta_text):
    run_dir = tmp_path / "run"
    write_run(run_dir)
    (run_dir / "meta.json").write_text(meta_text)
    with pytest.raises(RunFormatError) as info:
        read_run(run_dir)
    one_line_error(info)


def test_corrupt_config_is_an_error(tmp_path):
    write_run(tmp_path / "run")
    (tmp_path / "run" / "config.json").write_text("{nope")
    with pytest.raises(RunFormatError) as info:
        read_run(tmp_path / "run")
    assert "config.json" in one_line_error(info)


def test_not_a_run_directory(tmp_path):
    with pytest.raises(RunFormatError) as info:
        read_run(tmp_path / "missing")
    assert "does not exist" in one_line_error(info)
    file = tmp_path / "file.txt"
    file.write_text("x")
    with pytest.raises(RunFormatError) as info:
        read_run(file)
    assert "is a file" in one_line_error(info)
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunFormatError) as info:
        read_run(tmp_path / "empty")
    assert "meta.json" in one_line_error(info)


# ----------------------------------------------------------------------------- writer rules

def test_writer_refuses_existing_run_and_leaves_it_untouched(tmp_path):
    run_dir = tmp_path / "run"
    writer = write_run(run_dir, close=False)
    writer.log_eval(1, {"accuracy": 0.5})
    writer.save_snapshot(1, {"a": np.arange(3)})
    writer.close()
    before = tree_bytes(run_dir)
    with pytest.raises(RunFormatError) as info:
        RunWriter(run_dir, {"other": 1}, 5, "intruder")
    assert "already holds a run" in one_line_error(info)
    assert tree_bytes(run_dir) == before


def test_writer_checks_bins_length_and_labels(tmp_path):
    writer = RunWriter(tmp_path / "run", {}, NUM_BINS, "test")
    with pytest.raises(RunFormatError) as info:
        writer.log_step(0, {"x": 1.0}, {"share": [0.5, 0.5]})
    assert "share" in one_line_error(info)
    writer.log_step(0, {"x": 1.0}, {"share": [0.2, 0.3, 0.5]})
    writer.close()
    run = read_run(tmp_path / "run")
    assert run.steps.tolist() == [0]  # the rejected step wrote nothing
    assert run.meta["bin_labels"] == ["bin_0", "bin_1", "bin_2"]
    with pytest.raises(RunFormatError) as info:
        RunWriter(tmp_path / "run2", {}, NUM_BINS, "test", bin_labels=["a", "b"])
    one_line_error(info)


def test_resume_drops_later_records_and_torn_tail_then_appends(tmp_path):
    run_dir = tmp_path / "run"
    writer = write_run(run_dir, steps=range(10), close=False)
    for t in (0, 4, 8):
        writer.log_eval(t, {"accuracy": t / 10})
    writer.close("failed")
    with open(run_dir / "steps.jsonl", "ab") as handle:
        handle.write(b'{"step": 10, "sc')  # the crash tore the last line
    assert read_run(run_dir).torn_tail is True

    resumed = RunWriter.resume(run_dir, 5)
    assert read_run(run_dir).meta["status"] == "running"
    assert read_run(run_dir).steps.tolist() == [0, 1, 2, 3, 4, 5]
    for t in range(6, 9):
        resumed.log_step(t, {"mean_success": 1.0}, {"share": [0.1, 0.2, 0.7]})
    resumed.log_eval(8, {"accuracy": 0.9})
    resumed.close()

    run = read_run(run_dir)
    assert run.torn_tail is False
    assert run.steps.tolist() == list(range(9))
    assert run.meta["status"] == "finished" and run.meta["bin_labels"] == ["hard", "mid", "easy"]
    assert run.config["lr"] == 1e-6  # resume keeps the original config
    np.testing.assert_allclose(run.scalars["mean_success"][:6], 0.1 * np.arange(6))
    np.testing.assert_allclose(run.scalars["mean_success"][6:], 1.0)
    assert [(e["step"], e["metrics"]["accuracy"]) for e in run.evals] == [(0, 0.0), (4, 0.4), (8, 0.9)]


def test_resume_requires_a_run(tmp_path):
    with pytest.raises(RunFormatError) as info:
        RunWriter.resume(tmp_path / "nothing", 3)
    one_line_error(info)


def test_context_manager_marks_status(tmp_path):
    with RunWriter(tmp_path / "ok", {}, NUM_BINS, "test") as writer:
        writer.log_step(0, {}, {})
        assert read_run(tmp_path / "ok").meta["status"] == "running"
    assert read_run(tmp_path / "ok").meta["status"] == "finished"
    with pytest.raises(RuntimeError):
        with RunWriter(tmp_path / "bad", {}, NUM_BINS, "test") as writer:
            writer.log_step(0, {"x": 1.0}, {})
            raise RuntimeError("boom")
    run = read_run(tmp_path / "bad")
    assert run.meta["status"] == "failed" and run.steps.tolist() == [0]


def test_no_temporary_files_left_behind(tmp_path):
    with RunWriter(tmp_path / "run", {"a": 1}, NUM_BINS, "test") as writer:
        writer.save_snapshot(0, {"x": np.arange(4)})
    leftovers = [p for p in (tmp_path / "run").rglob("*.tmp")]
    assert leftovers == []


# ----------------------------------------------------------------------------- discovery

def test_find_runs_and_is_run_dir(tmp_path):
    write_run(tmp_path / "b")
    write_run(tmp_path / "a" / "nested")
    write_run(tmp_path / "a" / "nested" / "inner")
    (tmp_path / "not_a_run").mkdir()
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "meta.json").write_text(json.dumps({"format": "other"}))
    assert find_runs(tmp_path) == [tmp_path / "a" / "nested", tmp_path / "a" / "nested" / "inner", tmp_path / "b"]
    assert find_runs(tmp_path / "b") == [tmp_path / "b"]
    assert find_runs(tmp_path / "missing") == []
    assert is_run_dir(tmp_path / "b")
    assert not is_run_dir(tmp_path / "not_a_run")
    assert not is_run_dir(tmp_path / "fake")
    assert not is_run_dir(tmp_path / "missing")


# ----------------------------------------------------------------------------- one writer per run

def test_a_writer_holds_the_run_lock_until_close(tmp_path):
    """A second writer (another open file description, as another process has) is refused in one
    line and touches nothing while the first writes; after close it may resume."""
    from gdro_lab.runformat.runlog import LOCK_FILE, RunLock, RunLockedError
    run_dir = tmp_path / "run"
    writer = write_run(run_dir, steps=range(3), close=False)
    before = tree_bytes(run_dir)
    with pytest.raises(RunLockedError) as info:
        RunWriter.resume(run_dir, 1)
    assert "is being written by pid" in one_line_error(info)
    with pytest.raises(RunLockedError):
        RunLock.check(run_dir)
    assert tree_bytes(run_dir) == before                     # the refused resume rewrote nothing
    writer.close()
    RunLock.check(run_dir)
    resumed = RunWriter.resume(run_dir, 1)
    assert read_run(run_dir).steps.tolist() == [0, 1]
    resumed.close()
    assert (run_dir / LOCK_FILE).read_text().startswith("pid ")


def test_a_held_lock_is_the_callers(tmp_path):
    from gdro_lab.runformat.runlog import RunLock, RunLockedError
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    lock = RunLock(run_dir).acquire()
    writer = RunWriter(run_dir, {}, NUM_BINS, "test", lock=lock)
    writer.close()
    assert lock.held                                          # close() leaves the caller's lock
    with pytest.raises(RunLockedError):
        RunLock(run_dir).acquire()
    resumed = RunWriter.resume(run_dir, 0, lock=lock)
    resumed.close()
    lock.release()
    RunLock(run_dir).acquire().release()
    with pytest.raises(RunFormatError, match="held RunLock of this run directory"):
        RunWriter(tmp_path / "other", {}, NUM_BINS, "test", lock=RunLock(tmp_path / "other"))


def test_the_lock_dies_with_its_process(tmp_path):
    import signal
    import subprocess
    import sys

    from gdro_lab.runformat.runlog import RunLock, RunLockedError
    run_dir = tmp_path / "run"
    code = ("import sys, time; from gdro_lab.runformat.runlog import RunWriter; "
            "w = RunWriter(sys.argv[1], {}, 3, 'test'); print('writing', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(run_dir)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "writing"
        with pytest.raises(RunLockedError, match=f"pid {proc.pid}"):
            RunLock(run_dir).acquire()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    RunWriter.resume(run_dir, 0).close()                      # the killed writer left no stale lock
