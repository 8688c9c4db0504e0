"""The suite's shared fixtures (tests/conftest.py): what several test files only read is built once per session;
os.fsync checks its descriptor and writes nothing to the disk."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import pytest

Once = Callable[[str, Callable[[Path], Any]], Any]


def test_built_once_builds_once_and_every_later_caller_reads_it_back(built_once: Once) -> None:
    calls = []

    def build(folder: Path) -> dict[str, Any]:
        calls.append(folder)
        folder.mkdir()
        (folder / "made").write_text("once")
        return {"folder": folder, "count": 3}

    first = built_once("built-once-probe", build)
    assert built_once("built-once-probe", build) == first and len(calls) == 1  # the second read the record back
    assert (first["folder"] / "made").read_text() == "once"


def test_a_failed_build_leaves_nothing_the_next_caller_reads(built_once: Once) -> None:
    def broken(folder: Path) -> None:
        folder.mkdir()
        (folder / "half").write_text("")
        raise RuntimeError("the build failed")

    with pytest.raises(RuntimeError, match="the build failed"):
        built_once("built-once-broken", broken)

    def build(folder: Path) -> list[str]:
        folder.mkdir()
        return sorted(path.name for path in folder.iterdir())

    assert built_once("built-once-broken", build) == []  # built again, in a clean folder


def test_fsync_in_the_tests_still_refuses_a_closed_descriptor(tmp_path: Path) -> None:
    """The tests' os.fsync writes nothing to the disk, but a writer that fsyncs a closed or bad descriptor
    still fails, as with the real fsync."""
    with open(tmp_path / "file", "w", encoding="utf-8") as handle:
        os.fsync(handle.fileno())  # an open file: fine
        os.fsync(handle)  # an object with fileno(), as the real fsync takes
        fd = handle.fileno()
    with pytest.raises(OSError):
        os.fsync(fd)  # closed with the file
    with pytest.raises(OSError):
        os.fsync(-1)
