"""The list of runs under a folder, from their small files only: every run listed, or a reason.

:func:`run_info` reads ``meta.json``, ``config.json`` and the last line of ``steps.jsonl``; steps are
read later by the page that draws them. A folder with a ``meta.json`` that cannot be read is kept with a
one-line ``problem``, never hidden. Cached on the three files' mtime and size. No Streamlit here.
Detail: docs/app-data-notes.md#apps-data-listing; speed: docs/benchmarks.md#apps-data-listing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from apps.data.filecache import FileCache
from apps.data.loading import SKIPPED_FOLDERS, RunEntry, discover_runs, find_run_dirs
from gdro_lab.runformat import runlog
from gdro_lab.runformat.runlog import CONFIG_FILE, EVAL_FILE, META_FILE, STEPS_FILE, RunFormatError

#: Bytes read from the end of steps.jsonl to find its last complete line (read again, larger,
#: when one line is longer).
TAIL_BYTES = 64 << 10


@dataclass(frozen=True)
class RunInfo:
    """What the run list shows about a run without reading its steps.

    ``problem`` is a one-line reason when the run cannot be shown (then ``meta`` and ``config``
    may be empty); ``last_step`` and ``last_scalars`` come from the last complete line of
    ``steps.jsonl`` (None and empty before the first step), ``last_metrics`` from the last complete
    line of ``eval.jsonl`` (the run table offers their names as columns).
    """

    entry: RunEntry
    meta: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None
    last_step: int | None = None
    last_scalars: dict[str, Any] = field(default_factory=dict)
    #: steps.jsonl ends in a cut line (no final newline, or a last line that is not a JSON object).
    torn_tail: bool = False
    last_metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.entry.label

    @property
    def producer(self) -> str:
        return str(self.meta.get("producer", "")) if self.problem is None else ""

    @property
    def damage(self) -> str | None:
        """Why a readable run's files look damaged (one line), or None: a torn last line of a run
        that is not running, or a finished run that stops well before the steps its config asks
        for (:func:`expected_last_step`)."""
        if self.problem is not None or self.status == "running":
            return None
        notes = []
        expected = expected_last_step(self.config)
        if self.status == "finished" and expected is not None and self.last_step is not None \
                and self.last_step < expected - log_every(self.config):
            notes.append(f"truncated: stops at step {self.last_step} of {expected}")
        elif self.status == "finished" and expected is not None and expected > 0 and self.last_step is None:
            notes.append(f"truncated: no step logged of {expected}")
        if self.torn_tail:
            notes.append("steps.jsonl ends in a cut line")
        return "; ".join(notes) or None

    @property
    def status(self) -> str:
        return str(self.meta.get("status", "unknown")) if self.problem is None else "unreadable"


@dataclass(frozen=True)
class Listing:
    """Runs under a folder (and given ones): readable ones, and the others with their reasons."""

    runs: tuple[RunInfo, ...]
    problems: tuple[RunInfo, ...]
    truncated: bool


def expected_last_step(config: dict[str, Any]) -> int | None:
    """The last step a finished run should have logged: the config's ``steps`` (the simulator) or
    ``train.steps`` (the trainer); None when it says neither."""
    for value in (config.get("steps"), (config.get("train") or {}).get("steps")
                  if isinstance(config.get("train"), dict) else None):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def log_every(config: dict[str, Any]) -> int:
    """Steps between logged records (the simulator's ``log_every``; 1 otherwise)."""
    value = config.get("log_every")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def tail_is_torn(steps_file: Path) -> bool:
    """True when a non-empty steps.jsonl does not end with a newline (its last line is cut)."""
    try:
        with open(steps_file, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size == 0:
                return False
            handle.seek(size - 1)
            return handle.read(1) != b"\n"
    except OSError:
        return False


def find_candidates(root: Path, max_depth: int = 6, max_folders: int = 20_000) -> tuple[list[Path], bool]:
    """Folders under ``root`` (itself included) that hold a ``meta.json``, sorted; and whether the
    search was cut short. A candidate's own subfolders are not searched; hidden folders and
    virtual environments are skipped; at most ``max_depth`` levels and ``max_folders`` folders
    (:func:`apps.data.loading.find_run_dirs`'s walk, accepting every such folder)."""
    return find_run_dirs(root, max_depth, max_folders, accept=lambda _folder: True)


def empty_folders(root: Path, max_depth: int = 6, max_folders: int = 20_000) -> list[Path]:
    """Folders under ``root`` (not itself) that hold nothing at all, sorted: where a run was to be
    written (listed as empty, never silently left out). Run folders, hidden folders and virtual
    environments are not searched; at most ``max_depth`` levels and ``max_folders`` folders."""
    found: list[Path] = []
    base_depth = len(root.parts)
    for visited, (folder, subfolders, files) in enumerate(os.walk(root), start=1):
        here = Path(folder)
        if META_FILE in files:
            subfolders[:] = []
            continue
        if not subfolders and not files and here != root:
            found.append(here)
        if visited >= max_folders:
            break
        if len(here.parts) - base_depth >= max_depth:
            subfolders[:] = []
            continue
        subfolders[:] = sorted(name for name in subfolders if not name.startswith(".") and name not in SKIPPED_FOLDERS)
    return sorted(found)


def _stat(path: str) -> tuple[int, int]:
    try:
        stat = os.stat(path)
        return stat.st_mtime_ns, stat.st_size
    except OSError:
        return -1, -1


def info_signature(path: Path) -> tuple[tuple[int, int], ...]:
    """(mtime_ns, size) of meta.json, config.json, steps.jsonl and eval.jsonl: changes when a run's list
    entry may. Every page of every session asks it of every listed run: plain strings, not ``Path``
    objects (half the time at 1,000 runs)."""
    folder = os.fspath(path)
    return tuple(_stat(os.path.join(folder, name)) for name in (META_FILE, CONFIG_FILE, STEPS_FILE, EVAL_FILE))


def last_record(steps_file: Path, tail_bytes: int = TAIL_BYTES) -> dict[str, Any] | None:
    """The last complete, parseable line of a steps.jsonl as a dict (None when there is none yet).
    A torn last line (no newline) is skipped, as the readers do; only the end of the file is read
    (more of it when one line is longer than ``tail_bytes``)."""
    try:
        with open(steps_file, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            span = min(size, tail_bytes)
            while True:
                handle.seek(size - span)
                chunk = handle.read(span)
                lines = chunk[: chunk.rfind(b"\n") + 1].split(b"\n")[:-1]
                if span < size:
                    lines = lines[1:]  # the first line may have started before the chunk
                for line in reversed(lines):
                    try:
                        record = json.loads(line)
                    except (ValueError, UnicodeDecodeError):
                        continue
                    if isinstance(record, dict):
                        return record
                if span == size:
                    return None
                span = min(size, span * 4)
    except OSError:
        return None


def read_info(entry: RunEntry) -> RunInfo:
    """A run's list entry: meta, config and its last logged step, or the reason it cannot be read."""
    path = entry.path
    try:
        meta = runlog._read_meta(path)  # noqa: SLF001  (the reference reader's own checks and messages)
        config_path = path / CONFIG_FILE
        try:
            config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.exists() else {}
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise RunFormatError(f"{config_path} is corrupt: restore it from the producer's output") from None
        if not isinstance(config, dict):
            raise RunFormatError(f"{config_path} is not a JSON object: restore it from the producer's output")
    except RunFormatError as err:
        return RunInfo(entry, problem=" ".join(str(err).split()))
    except OSError as err:
        return RunInfo(entry, problem=f"{path} could not be read ({err.strerror or err}): check its permissions")
    record = last_record(path / STEPS_FILE)
    last_step: int | None = None
    scalars: dict[str, Any] = {}
    if record is not None:
        step = record.get("step")
        last_step = int(step) if isinstance(step, (int, float)) and not isinstance(step, bool) else None
        raw = record.get("scalars")
        scalars = dict(raw) if isinstance(raw, dict) else {}
    evaluation = last_record(path / EVAL_FILE) if (path / EVAL_FILE).exists() else None
    metrics = evaluation.get("metrics") if evaluation is not None else None
    return RunInfo(entry, meta, config, None, last_step, scalars, tail_is_torn(path / STEPS_FILE),
                   dict(metrics) if isinstance(metrics, dict) else {})


#: The process-wide cache of run list entries, keyed on (folder, label, :func:`info_signature`), shared by
#: every session (:class:`apps.data.filecache.FileCache`).
INFO_CACHE: FileCache[RunEntry, RunInfo] = FileCache(
    lambda entry: (str(entry.path), entry.label, info_signature(entry.path)), read_info, max_entries=4096)


def list_runs(root: Path | None, given: Sequence[Path] = (), found: Sequence[Path] | None = None,
              truncated: bool = False) -> Listing:
    """Every run under ``root`` (``found``, when already searched) and every given run, as list
    entries: the readable ones, then those that cannot be read with their one-line reasons.
    Given runs stay listed (and selectable) even when unreadable, so that their page says why."""
    if found is None and root is not None and root.is_dir():
        found, truncated = find_candidates(root)
    entries = discover_runs(root, given, list(found or []))
    given_paths = set(given)
    readable, problems = [], []
    for entry in entries:
        info = INFO_CACHE.get(entry)
        if info.problem is None:
            readable.append(info)
        else:
            problems.append(info)
            if entry.path in given_paths:
                readable.append(info)
    return Listing(tuple(readable), tuple(problems), truncated)
