"""The run list: every run folder under a root is listed or explained, from small files only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from app_helpers import assert_clean, markdown_tables, open_app
from gdro_app_synthetic import write_synthetic_run

from apps.data import listing
from gdro_lab.runformat.runlog import RunData


@pytest.fixture
def mixed_root(tmp_path: Path, synthetic_run: Path) -> Path:
    """A root with two good runs and one of each kind of unreadable run folder."""
    root = tmp_path / "mixed"
    for name in ("good-a", "good-b", "newer", "corrupt-meta", "corrupt-config", "foreign"):
        shutil.copytree(synthetic_run, root / name)
    meta = json.loads((root / "newer" / "meta.json").read_text())
    (root / "newer" / "meta.json").write_text(json.dumps({**meta, "version": 99}))
    (root / "corrupt-meta" / "meta.json").write_text('{"format": "gdro-run", "vers')
    (root / "corrupt-config" / "config.json").write_text('{"method": "bo')
    (root / "foreign" / "meta.json").write_text(json.dumps({"format": "another-tool"}))
    return root


REASONS = {"newer": "newer than this gdro-lab reads", "corrupt-meta": "meta.json is corrupt",
           "corrupt-config": "config.json is corrupt", "foreign": "is not a gdro-run file"}


def test_every_run_folder_is_listed_or_has_a_reason(mixed_root: Path) -> None:
    listed = listing.list_runs(mixed_root)
    assert [info.label for info in listed.runs] == ["good-a", "good-b"]
    reasons = {info.label: info.problem for info in listed.problems}
    assert set(reasons) == set(REASONS)
    for label, reason in REASONS.items():
        assert reason in reasons[label] and "\n" not in reasons[label], (label, reasons[label])


def test_runs_page_and_sidebar_name_the_unreadable_runs(mixed_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, mixed_root, view=None)
    assert_clean(app)
    run_table, problems = markdown_tables(app)[:2]
    assert [row[0] for row in run_table[1:]] == ["good-a", "good-b"]
    assert problems[0] == ["run", "reason"]
    shown = {row[0]: row[1] for row in problems[1:]}
    assert set(shown) == set(REASONS) and all(REASONS[label] in shown[label] for label in REASONS)
    assert any("4 run folders" in element.value and "cannot be read" in element.value for element in app.warning)
    assert any("4 run folders" in element.value for element in app.sidebar.caption)


def test_a_url_naming_an_unreadable_run_says_why(mixed_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, mixed_root, view=None, query={"run": "newer"})
    assert_clean(app)
    warnings = " ".join(element.value for element in app.warning)
    assert "**newer**, cannot be read" in warnings and "newer than this gdro-lab reads" in warnings


def test_the_run_list_reads_no_steps(mixed_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The landing page lists runs from meta.json, config.json and the last line of steps.jsonl:
    a reader of whole runs that fails makes no difference to it."""
    from apps.data import fastread, loading

    def refuse(path: object) -> RunData:
        raise AssertionError(f"the run list read every step of {path}")

    monkeypatch.setattr(fastread, "read_run_fast", refuse)
    monkeypatch.setattr(loading, "read_run_fast", refuse)
    loading.RUN_CACHE.clear()
    app = open_app(monkeypatch, mixed_root, view=None)
    assert_clean(app)
    table = markdown_tables(app)[0]
    header = table[0]
    assert [row[header.index("last step")] for row in table[1:]] == ["29", "29"]


def test_last_record_skips_a_torn_tail_and_reads_long_lines(tmp_path: Path) -> None:
    steps = tmp_path / "steps.jsonl"
    records = [{"step": step, "scalars": {"mean_success": step / 10, "pad": "x" * 3000}} for step in range(5)]
    steps.write_text("".join(json.dumps(record) + "\n" for record in records) + '{"step": 5, "scal')
    assert listing.last_record(steps, tail_bytes=1000) == records[-1], "a line longer than the tail read"
    steps.write_text("")
    assert listing.last_record(steps) is None
    assert listing.last_record(tmp_path / "absent.jsonl") is None


def test_run_list_follows_a_growing_run(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "grow", steps=5, num_bins=4)
    first = listing.list_runs(tmp_path).runs[0]
    with open(run / "steps.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"step": 5, "scalars": {"mean_success": 0.5}, "bins": {}}) + "\n")
    second = listing.list_runs(tmp_path).runs[0]
    assert (first.last_step, second.last_step) == (4, 5) and second.last_scalars["mean_success"] == 0.5


def test_run_cache_is_bounded_in_bytes_not_only_in_runs(seeds_root: Path) -> None:
    from apps.data import loading

    paths = sorted(path.parent for path in seeds_root.rglob("meta.json"))
    one = loading.run_bytes(loading.load_run(paths[0]))
    cache = loading.run_cache(max_entries=512, max_bytes=int(2.5 * one))
    for path in paths[:4]:
        cache.get(path)
    assert len(cache) == 2 and cache.held_bytes <= int(2.5 * one), "the two most recent runs fit"
    roomy = loading.run_cache()
    assert [run.path for run in roomy.get_many(paths)] == paths and len(roomy) == len(paths)
