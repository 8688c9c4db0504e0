"""The app's fast run reader (pyarrow) against the reference reader (``gdro_lab.runformat.runlog.read_run``),
and the shared run cache: same runs, same errors, re-read when a run grows, parallel reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from apps.data import fastread, loading
from gdro_app_synthetic import write_synthetic_run
from gdro_lab.runformat.runlog import RunData, RunFormatError, read_run


def assert_same_run(fast: RunData, reference: RunData) -> None:
    """Every field equal; arrays equal bit for bit (NaN where NaN), with the same dtypes and shapes."""
    assert fast.path == reference.path and fast.meta == reference.meta and fast.config == reference.config
    assert fast.evals == reference.evals and fast.snapshot_steps == reference.snapshot_steps
    assert fast.torn_tail == reference.torn_tail
    assert fast.steps.dtype == reference.steps.dtype and np.array_equal(fast.steps, reference.steps)
    for ours, theirs in ((fast.scalars, reference.scalars), (fast.bins, reference.bins)):
        assert list(ours) == list(theirs)
        for name in theirs:
            assert ours[name].dtype == theirs[name].dtype and ours[name].shape == theirs[name].shape, name
            assert np.array_equal(ours[name], theirs[name], equal_nan=True), name


def fast_only(path: Path, monkeypatch: pytest.MonkeyPatch) -> RunData:
    """Read with the fast path, failing if it falls back to the reference reader."""
    def no_fallback(_path: Any) -> RunData:
        raise AssertionError("the fast path fell back to read_run")

    with monkeypatch.context() as patch:
        patch.setattr(fastread, "read_run", no_fallback)
        return fastread.read_run_fast(path)


def rewrite_steps(path: Path, edit: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
    records = [json.loads(line) for line in (path / "steps.jsonl").read_text().splitlines()]
    (path / "steps.jsonl").write_text("".join(json.dumps(record) + "\n" for record in edit(records)))


@pytest.mark.parametrize("real", [False, True])
def test_fast_reader_matches_reference_on_synthetic_runs(tmp_path: Path, real: bool,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_synthetic_run(tmp_path / "run", steps=60, num_bins=7, seed=2, real=real, warmup=5 if real else 0)
    assert_same_run(fast_only(path, monkeypatch), read_run(path))


def test_fast_reader_matches_reference_on_ragged_records(copy_run: Callable[[str], Path],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = copy_run("ragged")

    def edit(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        records[2]["bins"]["share"] = [0.5, 0.5]  # wrong length: a NaN row
        records[3]["bins"]["weight"][1] = None  # one missing value
        del records[4]["bins"]["reward"]  # a field missing on one step
        records[5]["scalars"]["late_scalar"] = 7  # an int scalar that appears late
        records[6]["scalars"]["mean_success"] = None
        records[8]["bins"]["new_field"] = [1] * 6
        return records

    rewrite_steps(path, edit)
    fast = fast_only(path, monkeypatch)
    assert_same_run(fast, read_run(path))
    assert np.isnan(fast.bins["share"][2]).all() and np.isnan(fast.bins["weight"][3, 1])
    assert fast.scalars["late_scalar"][5] == 7.0 and np.isnan(fast.scalars["late_scalar"][4])


def test_fast_reader_handles_torn_tails_like_reference(torn_run: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    fast = fast_only(torn_run, monkeypatch)
    assert fast.torn_tail
    assert_same_run(fast, read_run(torn_run))
    only_torn = write_synthetic_run(tmp_path / "only", steps=3, num_bins=6, seed=1)
    (only_torn / "steps.jsonl").write_text('{"step": 0, "scalars": {')
    assert_same_run(fast_only(only_torn, monkeypatch), read_run(only_torn))
    corrupt_last = write_synthetic_run(tmp_path / "corrupt-last", steps=5, num_bins=6, seed=1)
    with open(corrupt_last / "steps.jsonl", "a") as handle:
        handle.write("{not json}\n")
    fast = fastread.read_run_fast(corrupt_last)
    assert fast.torn_tail and fast.steps.size == 5
    assert_same_run(fast, read_run(corrupt_last))


def test_fast_reader_falls_back_for_what_it_cannot_mirror(copy_run: Callable[[str], Path]) -> None:
    path = copy_run("unusual")

    def edit(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        records[1]["scalars"]["flag"] = True  # a boolean: read_run turns it into 1.0
        records[2]["step"] = 2.0  # a float step
        del records[7]["scalars"]  # no scalars on one line
        return records

    rewrite_steps(path, edit)
    with open(path / "steps.jsonl", "a") as handle:
        handle.write("\n")  # a blank line at the end
    fast = fastread.read_run_fast(path)
    assert_same_run(fast, read_run(path))
    assert fast.scalars["flag"][1] == 1.0


def test_fast_reader_raises_the_reference_errors(corrupt_steps_run: Path, corrupt_config_run: Path,
                                                 corrupt_meta_run: Path, malformed_record_run: Path,
                                                 not_a_run: Path) -> None:
    for path in (corrupt_steps_run, corrupt_config_run, corrupt_meta_run, not_a_run):
        with pytest.raises(RunFormatError) as reference:
            read_run(path)
        with pytest.raises(RunFormatError) as fast:
            fastread.read_run_fast(path)
        assert str(fast.value) == str(reference.value)
    with pytest.raises(loading.RunLoadError, match="malformed record"):
        loading.load_run(malformed_record_run)


def test_empty_run_reads_like_reference(empty_run: Path) -> None:
    assert_same_run(fastread.read_run_fast(empty_run), read_run(empty_run))


def test_run_cache_rereads_a_grown_run_and_reads_many_in_parallel(
        live_run: tuple[Path, Callable[[int], None]], runs_root: Path, not_a_run: Path) -> None:
    cache = loading.run_cache(max_entries=8)
    path, append = live_run
    first = cache.get(path)
    assert cache.get(path) is first, "an unchanged run is read once"
    append(3)
    grown = cache.get(path)
    assert grown.steps.size == first.steps.size + 3
    paths = sorted(p for p in (runs_root / "study").iterdir())
    loaded = cache.get_many_or_errors([*paths, not_a_run], (loading.RunLoadError,))
    assert [run.path for run in loaded[:-1]] == paths  # type: ignore[union-attr]
    assert isinstance(loaded[-1], loading.RunLoadError) and "not a gdro run directory" in str(loaded[-1])
    for run, path_ in zip(loaded, paths):
        assert_same_run(run, loading.load_run(path_))  # type: ignore[arg-type]
    cache.clear()
    assert cache.get(paths[0]) is not loaded[0]


def test_warm_runs_fills_the_cache_within_its_budget(runs_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = loading.run_cache()
    monkeypatch.setattr(loading, "RUN_CACHE", cache)
    assert loading.warm_runs(runs_root, max_runs=2) == 2
    assert loading.warm_runs(runs_root, max_bytes=1) == 0, "the byte budget stops before the first run"
    assert loading.warm_runs(runs_root) == 3
