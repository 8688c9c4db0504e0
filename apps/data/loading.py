"""Finding run directories and reading them for the app: one-line errors, a shared run cache.

Runs are read with :func:`apps.data.fastread.read_run_fast` (same :class:`RunData` and errors as
``read_run``) and kept in :data:`RUN_CACHE`, keyed on the folder and :func:`run_signature`, so a growing
run is read again and an unchanged one once per server. No Streamlit here. Detail:
docs/app-data-notes.md#apps-data-loading.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from apps.data.fastread import read_run_fast
from apps.data.filecache import FileCache
from gdro_lab.runformat.runlog import (CONFIG_FILE, EVAL_FILE, META_FILE, SNAPSHOT_DIR, STEPS_FILE, RunData,
                                       RunFormatError, is_run_dir)

#: Folders never searched for runs (besides hidden ones).
SKIPPED_FOLDERS = frozenset({"__pycache__", "node_modules", "site-packages", "venv", "snapshots"})


class RunLoadError(Exception):
    """A run directory cannot be shown; the message is one line that names the problem and the fix."""


@dataclass(frozen=True)
class RunEntry:
    """A run offered in the app: its folder and a short unique label."""

    path: Path
    label: str


def run_label(path: Path, root: Path | None, resolved_root: Path | None = None) -> str:
    """The run's folder relative to ``root`` when inside it, else its own name (``resolved_root``:
    ``root.resolve()`` when the caller has it, to label many runs without resolving it each time)."""
    if root is not None:
        try:  # a folder found by walking ``root`` is under it as spelled: no symlink to resolve
            relative = path.relative_to(root)
            if relative.parts and ".." not in relative.parts:
                return relative.as_posix()
        except ValueError:
            pass
        try:
            relative = path.resolve().relative_to(resolved_root or root.resolve())
            if relative.parts:
                return relative.as_posix()
        except (ValueError, OSError):
            pass
    return path.name or str(path)


def find_run_dirs(root: Path, max_depth: int = 6, max_folders: int = 20_000,
                  accept: Callable[[Path], bool] = is_run_dir) -> tuple[list[Path], bool]:
    """Run directories under ``root`` (itself included), sorted; and whether the search was cut short.

    At most ``max_depth`` levels and ``max_folders`` folders; hidden folders, virtual environments and a
    run's own folder are skipped. A folder with a ``meta.json`` is a run when ``accept(folder)`` (default:
    a readable run directory).
    """
    found: list[Path] = []
    visited = 0
    truncated = False
    base_depth = len(root.parts)
    for folder, subfolders, files in os.walk(root):
        visited += 1
        here = Path(folder)
        if META_FILE in files and accept(here):
            found.append(here)
            subfolders[:] = []
            continue
        if visited >= max_folders or len(here.parts) - base_depth >= max_depth:
            truncated = truncated or bool(subfolders)
            subfolders[:] = []
            if visited >= max_folders:
                break
            continue
        subfolders[:] = sorted(name for name in subfolders if not name.startswith(".") and name not in SKIPPED_FOLDERS)
    return sorted(found), truncated


def discover_runs(root: Path | None, given: Sequence[Path] = (), found: Sequence[Path] | None = None) -> list[RunEntry]:
    """Runs given explicitly (kept even when invalid, so the page can say why) then runs under ``root``.

    ``found`` are the runs under ``root`` when already searched (:func:`find_run_dirs`).
    """
    if found is None:
        found = find_run_dirs(root)[0] if root is not None else []
    paths: list[Path] = []
    seen: set[Path] = set()
    for path in given:
        resolved = path.resolve()
        if resolved not in seen:
            seen.add(resolved)
            paths.append(path)
    # A walk lists each folder once: the found runs are resolved only to drop those also given.
    paths += [path for path in dict.fromkeys(found) if path.resolve() not in seen] if seen else list(dict.fromkeys(found))
    labels: list[str] = []
    taken: set[str] = set()
    base = root.resolve() if root is not None else None
    for path in paths:
        label = run_label(path, root, base)
        while label in taken:
            label = f"{label} ({path.parent.name or path.parent})"
            if label in taken:
                label = str(path)
                break
        labels.append(label)
        taken.add(label)
    return [RunEntry(path, label) for path, label in zip(paths, labels)]


def run_signature(path: Path) -> tuple[tuple[str, int, int], ...]:
    """(file, mtime_ns, size) of every file a run reader looks at: changes whenever a run grows."""
    signature = []
    for name in (META_FILE, CONFIG_FILE, STEPS_FILE, EVAL_FILE, SNAPSHOT_DIR):
        try:
            stat = (path / name).stat()
            signature.append((name, stat.st_mtime_ns, stat.st_size))
        except OSError:
            signature.append((name, -1, -1))
    return tuple(signature)


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def load_run(path: Path) -> RunData:
    """Read a run; every failure becomes a :class:`RunLoadError` with a one-line message.

    Steps where no prompt is assigned to a bin yet get null (NaN) shares (:func:`mask_unassigned`).
    """
    try:
        return mask_unassigned(read_run_fast(path))
    except RunFormatError as err:
        raise RunLoadError(_one_line(str(err))) from None
    except OSError as err:
        raise RunLoadError(_one_line(f"{path} could not be read ({err.strerror or err}): "
                                     "check that the folder and its files are readable")) from None
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as err:
        raise RunLoadError(_one_line(f"{path} holds a malformed record ({type(err).__name__}: {err}): "
                                     "the run's files are damaged; check its producer")) from None


def assigned_counts(run: RunData) -> np.ndarray | None:
    """Prompts assigned to some bin per step, shape (T,): sum of the ``count`` bins, else
    ``num_prompts - num_unassigned``; None when the run logs neither."""
    if "count" in run.bins:
        return np.nansum(run.bins["count"], axis=1)
    if "num_prompts" in run.scalars and "num_unassigned" in run.scalars:
        return run.scalars["num_prompts"] - run.scalars["num_unassigned"]
    return None


def mask_unassigned(run: RunData) -> RunData:
    """The run with null shares on steps where no prompt is in any bin yet (returns the same object).

    Those zeros are not data (docs/app-data-notes.md#apps-data-loading); the run's files are not touched.
    """
    assigned = assigned_counts(run)
    if assigned is None or "share" not in run.bins or run.steps.size == 0:
        return run
    empty_T = ~(np.nan_to_num(assigned) > 0)
    if empty_T.any():
        share = run.bins["share"].copy()
        share[empty_T] = np.nan
        run.bins["share"] = share
    return run


def unassigned_steps(run: RunData) -> int:
    """Number of logged steps on which no prompt was assigned to any bin (shares shown as null)."""
    assigned = assigned_counts(run)
    return 0 if assigned is None else int((~(np.nan_to_num(assigned) > 0)).sum())


def in_warmup(run: RunData, fields: Sequence[str] = ("share",)) -> bool:
    """True when the run logs the per-bin ``fields`` but no prompt has been assigned to a bin on
    any step logged so far (the classifier's warm-up): their values are still to come, not
    missing from the run."""
    return (run.steps.size > 0 and all(name in run.bins for name in fields)
            and unassigned_steps(run) == run.steps.size)


def eval_tail_torn(path: Path) -> bool:
    """True when ``eval.jsonl`` ends in a torn line (no final newline, or an unparseable last line);
    the reader drops that line, and the app says so."""
    target = path / EVAL_FILE
    try:
        with open(target, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 65536))
            tail = handle.read()
    except OSError:
        return False
    if not tail:
        return False
    if not tail.endswith(b"\n"):
        return True
    last = tail.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    try:
        record = json.loads(last) if last.strip() else {}
    except (ValueError, UnicodeDecodeError):
        return True
    return not isinstance(record, dict)


def folder_problem(root: Path) -> str | None:
    """Why ``root`` cannot be searched for runs (one line), or None when it is a folder."""
    if root.is_dir():
        return None
    if root.exists():
        return f"`{root}` is a file, not a folder: type the folder that holds the run directories"
    return f"`{root}` does not exist: type an existing folder"


def summary(run: RunData) -> dict[str, Any]:
    """One-line facts about a run for captions: status, producer, steps, bins, torn tail."""
    return {"status": str(run.meta.get("status", "unknown")), "producer": str(run.meta.get("producer", "")),
            "steps": int(run.steps.size), "last_step": int(run.steps[-1]) if run.steps.size else None,
            "bins": run.num_bins, "evals": len(run.evals), "snapshots": len(run.snapshot_steps),
            "torn_tail": bool(run.torn_tail), "eval_torn": eval_tail_torn(run.path),
            "unassigned_steps": unassigned_steps(run)}


def torn_notes(run: RunData) -> list[str]:
    """Honest captions for torn last lines: still being written (running) or damaged (finished)."""
    facts = summary(run)
    running = facts["status"] == "running"
    notes = []
    for torn, name in ((facts["torn_tail"], STEPS_FILE), (facts["eval_torn"], EVAL_FILE)):
        if not torn:
            continue
        if running:
            notes.append(f"the last line of {name} is still being written (not shown yet)")
        else:
            notes.append(f"the last line of {name} is cut short and was ignored: the run is "
                         f"{facts['status']}, so the file was damaged (e.g. a crash or a full disk)")
    return notes


Signature = tuple[tuple[str, int, int], ...]


def run_key(path: Path) -> tuple[str, Signature]:
    """A run folder's cache key: the folder and :func:`run_signature` (a new key whenever the run grows)."""
    return str(path), run_signature(path)


def run_bytes(run: RunData) -> int:
    """Memory held by a run's arrays (what the cache budgets)."""
    return int(run.steps.nbytes + sum(values.nbytes for values in run.scalars.values())
               + sum(values.nbytes for values in run.bins.values()))


def run_cache(max_entries: int = 512, max_bytes: int = 2 << 30) -> FileCache[Path, RunData]:
    """Runs read from disk (:func:`load_run`), keyed on (folder, :func:`run_signature`), least recently
    used first out, bounded in runs and in bytes (:func:`run_bytes`; the bounds:
    docs/app-data-notes.md#apps-data-loading). A run whose files changed has a new signature and is read
    again; read errors are not kept (:class:`apps.data.filecache.FileCache`)."""
    return FileCache(run_key, load_run, max_entries=max_entries, max_bytes=max_bytes, size=run_bytes,
                     thread_name="gdro-read")


#: The process-wide run cache of the app.
RUN_CACHE = run_cache()


def warm_runs(root: Path, given: Sequence[Path] = (), max_runs: int = 32, max_bytes: int = 256 << 20) -> int:
    """Read the first runs under ``root`` (and ``given``) into :data:`RUN_CACHE`, within a run and a
    byte budget (``steps.jsonl`` sizes); returns how many were read. Used at server start, before the
    first request, so that the first page does not wait for the disk."""
    found = find_run_dirs(root)[0] if root.is_dir() else []
    paths, total = [], 0
    for path in [*given, *found][:max_runs]:
        try:
            total += (path / STEPS_FILE).stat().st_size
        except OSError:
            continue
        if total > max_bytes:
            break
        paths.append(path)
    return sum(isinstance(run, RunData) for run in RUN_CACHE.get_many_or_errors(paths, (RunLoadError,)))
