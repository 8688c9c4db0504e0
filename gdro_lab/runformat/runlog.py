"""Run directory: the one on-disk format every producer writes and every reader reads.

Format ``gdro-run``, version :data:`FORMAT_VERSION` (layout: ``docs/run-format.md``): meta.json,
config.json, steps.jsonl (one line per step), eval.jsonl, snapshots/ and the one-writer lock
(:class:`RunLock`). Readers drop a torn last line and report a corrupt line anywhere else; JSON files
other than the logs are written to a temporary name and renamed (atomic on POSIX).
"""

from __future__ import annotations

import base64
import datetime as _dt
import fcntl
import json
import math
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

FORMAT_NAME = "gdro-run"
FORMAT_VERSION = 1
STEPS_FILE = "steps.jsonl"
EVAL_FILE = "eval.jsonl"
META_FILE = "meta.json"
CONFIG_FILE = "config.json"
SNAPSHOT_DIR = "snapshots"
LOCK_FILE = ".writer.lock"


class RunFormatError(ValueError):
    """A path is not a readable run directory; the message names the problem and the fix."""


# ----------------------------------------------------------------------------- encoding

def to_jsonable(obj: Any) -> Any:
    """Turn numpy values, arrays and non-finite floats into plain JSON values.

    Arrays become ``{"__ndarray__": [...], "dtype": str, "shape": [...]}`` inside snapshots
    (see :func:`encode_state`); here (logs) they become lists with NaN/inf as null.
    """
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        value = float(obj)
        return value if math.isfinite(value) else None
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def encode_state(obj: Any) -> Any:
    """Encode a state_dict losslessly for JSON: arrays as base64 of their bytes with dtype and
    shape (exact, compact), tuples/lists tagged, non-finite floats tagged."""
    if isinstance(obj, Mapping):
        return {str(k): encode_state(v) for k, v in obj.items()}
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "biuf":
            raise TypeError(f"cannot snapshot an array of dtype {obj.dtype}: use numbers")
        raw = np.ascontiguousarray(obj).tobytes()
        return {"__ndarray__": base64.b64encode(raw).decode("ascii"), "dtype": obj.dtype.str,
                "shape": list(obj.shape)}
    if isinstance(obj, (list, tuple)):
        return {"__list__": [encode_state(v) for v in obj]}
    if isinstance(obj, np.generic):
        return encode_state(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return {"__float__": repr(obj)}
    return obj


def decode_state(obj: Any) -> Any:
    """Inverse of :func:`encode_state`."""
    if isinstance(obj, dict):
        if "__ndarray__" in obj:
            raw = base64.b64decode(obj["__ndarray__"])
            return np.frombuffer(raw, dtype=np.dtype(obj["dtype"])).reshape(obj["shape"]).copy()
        if "__list__" in obj:
            return [decode_state(v) for v in obj["__list__"]]
        if "__float__" in obj:
            return float(obj["__float__"])
        return {k: decode_state(v) for k, v in obj.items()}
    return obj


def _write_json_atomic(path: Path, payload: Any, indent: int | None = 1) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(payload, handle, indent=indent, allow_nan=False)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- one writer per run

class RunLockedError(RunFormatError):
    """Another process is writing the run; the message names it and the fix."""


class RunLock:
    """Exclusive advisory lock of a run directory: at most one process writes a run.

    ``RunLock(run_dir).acquire()`` takes ``fcntl.flock`` on ``run_dir/.writer.lock`` (the folder must exist);
    a second writer gets :class:`RunLockedError` naming the holder. Released when the holder's descriptor
    closes; local file systems only. Detail: docs/run-format.md#gdro_lab-runformat-runlog.
    """

    def __init__(self, run_dir: str | os.PathLike[str]):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> "RunLock":
        """Take the lock (a no-op when this object holds it already) or raise RunLockedError."""
        if self._fd is not None:
            return self
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunLockedError(_busy(self.run_dir)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode("utf-8"), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @staticmethod
    def check(run_dir: str | os.PathLike[str]) -> None:
        """Raise RunLockedError if another process holds ``run_dir``'s lock (creates nothing)."""
        path = Path(run_dir) / LOCK_FILE
        if not path.exists():
            return
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunLockedError(_busy(Path(run_dir))) from None
        finally:
            os.close(fd)

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def lock_holder(run_dir: str | os.PathLike[str]) -> str:
    """Who wrote the lock file last (``"pid N on HOST"``), or ``"another process"``."""
    try:
        return (Path(run_dir) / LOCK_FILE).read_text(encoding="utf-8").strip() or "another process"
    except OSError:
        return "another process"


def _busy(run_dir: Path) -> str:
    return (f"{run_dir} is being written by {lock_holder(run_dir)}: wait for it to finish or stop it, "
            "then resume (nothing was touched)")


# ----------------------------------------------------------------------------- writer

class RunWriter:
    """Append-only writer of a run directory.

    ``RunWriter(path, config, num_bins, producer)`` creates a new run and refuses a folder that holds one.
    ``RunWriter.resume(path, step)`` drops records after ``step`` and a torn last line. Both hold the run's
    :class:`RunLock` while they write (``lock=`` a caller's, which ``close`` leaves; else their own).
    """

    def __init__(self, path: str | os.PathLike[str], config: Mapping[str, Any], num_bins: int,
                 producer: str, bin_labels: Iterable[str] | None = None, *, lock: RunLock | None = None,
                 _resume: bool = False):
        self.path = Path(path)
        self.num_bins = int(num_bins)
        self._own_lock: RunLock | None = None
        if not _resume:
            if (self.path / META_FILE).exists():
                raise RunFormatError(f"{self.path} already holds a run: choose another output folder "
                                     "or resume it (nothing was overwritten)")
            self.path.mkdir(parents=True, exist_ok=True)
            self._take_lock(lock)
            labels = list(bin_labels) if bin_labels is not None else [f"bin_{b}" for b in range(num_bins)]
            if len(labels) != num_bins:
                self._drop_lock()
                raise RunFormatError(f"bin_labels has {len(labels)} names for {num_bins} bins: give one per bin")
            self.meta = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "producer": producer,
                         "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                         "num_bins": self.num_bins, "bin_labels": labels, "status": "running"}
            try:
                _write_json_atomic(self.path / CONFIG_FILE, to_jsonable(dict(config)))
                _write_json_atomic(self.path / META_FILE, self.meta)
            except BaseException:
                self._drop_lock()
                raise
        else:
            self._take_lock(lock)   # resume() took it already when it rewrote the logs
            self.meta = _read_meta(self.path)
            self.meta["status"] = "running"
            _write_json_atomic(self.path / META_FILE, self.meta)
        (self.path / SNAPSHOT_DIR).mkdir(exist_ok=True)
        self._steps = open(self.path / STEPS_FILE, "a", encoding="utf-8")
        self._evals = open(self.path / EVAL_FILE, "a", encoding="utf-8")

    def _take_lock(self, lock: RunLock | None) -> None:
        if lock is not None:
            if not lock.held or lock.run_dir.resolve() != self.path.resolve():
                raise RunFormatError(f"RunWriter({self.path}): lock= must be a held RunLock of this run directory")
            return
        self._own_lock = RunLock(self.path).acquire()

    def _drop_lock(self) -> None:
        if self._own_lock is not None:
            self._own_lock.release()
            self._own_lock = None

    @classmethod
    def resume(cls, path: str | os.PathLike[str], step: int, *, lock: RunLock | None = None) -> "RunWriter":
        """Reopen ``path`` to continue after ``step``: later records and a torn tail are dropped.

        The run's lock (``lock=``, else taken here) is held before any file is rewritten."""
        run_path = Path(path)
        meta = _read_meta(run_path)
        own = RunLock(run_path).acquire() if lock is None else None
        try:
            cls._drop_after(run_path, step)
            writer = cls(run_path, {}, int(meta["num_bins"]), str(meta.get("producer", "")),
                         lock=lock or own, _resume=True)
        except BaseException:
            if own is not None:
                own.release()
            raise
        writer._own_lock = own
        return writer

    @staticmethod
    def _drop_after(run_path: Path, step: int) -> None:
        for name in (STEPS_FILE, EVAL_FILE):
            file = run_path / name
            if file.exists():
                records, _ = _read_jsonl(file)
                kept = [r for r in records if int(r.get("step", -1)) <= step]
                tmp = file.with_name(file.name + ".tmp")
                with open(tmp, "w", encoding="utf-8") as handle:
                    for record in kept:
                        handle.write(json.dumps(record, allow_nan=False) + "\n")
                os.replace(tmp, file)

    def log_step(self, step: int, scalars: Mapping[str, Any], bins: Mapping[str, Any]) -> None:
        """Append one step: ``scalars`` maps names to numbers, ``bins`` maps names to length-G arrays."""
        for name, values in bins.items():
            if len(values) != self.num_bins:
                raise RunFormatError(f"bins[{name!r}] has {len(values)} values for {self.num_bins} bins")
        record = {"step": int(step), "scalars": to_jsonable(scalars), "bins": to_jsonable(bins)}
        self._steps.write(json.dumps(record, allow_nan=False) + "\n")
        self._steps.flush()

    def log_eval(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Append one evaluation record (accuracy, pass@k, per-group results...)."""
        record = {"step": int(step), "metrics": to_jsonable(metrics)}
        self._evals.write(json.dumps(record, allow_nan=False) + "\n")
        self._evals.flush()

    def save_snapshot(self, step: int, state: Mapping[str, Any]) -> Path:
        """Write controller state_dicts for ``step`` atomically; returns the file."""
        target = self.path / SNAPSHOT_DIR / f"step_{int(step):08d}.json"
        _write_json_atomic(target, {"step": int(step), "state": encode_state(state)}, indent=None)
        return target

    def close(self, status: str = "finished") -> None:
        """Close the logs, record the final status ("finished", "failed", ...), release an own lock."""
        self._steps.close()
        self._evals.close()
        self.meta["status"] = status
        _write_json_atomic(self.path / META_FILE, self.meta)
        self._drop_lock()

    def __enter__(self) -> "RunWriter":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close("finished" if exc_type is None else "failed")


# ----------------------------------------------------------------------------- reader

@dataclass
class RunData:
    """Everything in a run directory, as numpy arrays.

    ``scalars[name]`` has shape (T,), ``bins[name]`` has shape (T, G); missing values are NaN.
    ``steps`` has shape (T,). ``torn_tail`` tells whether a half-written last line was dropped.
    """

    path: Path
    meta: dict[str, Any]
    config: dict[str, Any]
    steps: np.ndarray
    scalars: dict[str, np.ndarray]
    bins: dict[str, np.ndarray]
    evals: list[dict[str, Any]] = field(default_factory=list)
    snapshot_steps: list[int] = field(default_factory=list)
    torn_tail: bool = False

    @property
    def num_bins(self) -> int:
        return int(self.meta["num_bins"])

    @property
    def name(self) -> str:
        return self.path.name


def is_run_dir(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` has a meta.json of the gdro-run format."""
    try:
        return _read_meta(Path(path))["format"] == FORMAT_NAME
    except (RunFormatError, KeyError):
        return False


def find_runs(root: str | os.PathLike[str]) -> list[Path]:
    """All run directories under ``root`` (itself included), sorted by path."""
    base = Path(root)
    if not base.is_dir():
        return []
    return sorted(p.parent for p in base.rglob(META_FILE) if is_run_dir(p.parent))


def _read_meta(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise RunFormatError(f"{path} does not exist: pass the folder a simulator or trainer wrote")
    if not path.is_dir():
        raise RunFormatError(f"{path} is a file, not a run directory: pass its folder")
    meta_path = path / META_FILE
    if not meta_path.exists():
        raise RunFormatError(f"{path} is not a gdro run directory (no {META_FILE}): "
                             "pass a folder written by `gdro simulate` or a trainer")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise RunFormatError(f"{meta_path} is corrupt ({err.__class__.__name__}): "
                             "restore it from the producer's output") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise RunFormatError(f"{meta_path} is not a {FORMAT_NAME} file: pass a gdro run directory")
    version = meta.get("version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise RunFormatError(f"{path} uses run format version {version}, newer than this gdro-lab "
                             f"reads ({FORMAT_VERSION}): upgrade gdro-lab")
    if not isinstance(meta.get("num_bins"), int) or meta["num_bins"] < 1:
        raise RunFormatError(f"{meta_path} has no valid num_bins: the file is damaged")
    return meta


def read_evals(run_path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The evaluation records of a run (``eval.jsonl``: ``{"step", "metrics"}``), a torn last line dropped."""
    return _read_jsonl(Path(run_path) / EVAL_FILE)[0]


def _read_jsonl(path: Path) -> tuple[list[dict[str, Any]], bool]:
    """Records of a JSON Lines log; a torn (unparseable or unterminated) last line is dropped."""
    if not path.exists():
        return [], False
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    torn = False
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines:
        torn = True  # no newline at the end: the writer died mid-line
        lines.pop()
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or "step" not in record:
                raise ValueError("not a step record")
        except (ValueError, UnicodeDecodeError):
            if number == len(lines) and not torn:
                torn = True
                break
            raise RunFormatError(f"{path} line {number} is corrupt: the log is damaged before its end; "
                                 "truncate the file before that line to read the rest") from None
        records.append(record)
    return records, torn


def _column(values: list[Any]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def read_run(path: str | os.PathLike[str]) -> RunData:
    """Read a run directory (finished or still being written) into arrays."""
    run_path = Path(path)
    meta = _read_meta(run_path)
    config_path = run_path / CONFIG_FILE
    try:
        config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.exists() else {}
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise RunFormatError(f"{config_path} is corrupt: restore it from the producer's output") from None
    records, torn = _read_jsonl(run_path / STEPS_FILE)
    num_bins = int(meta["num_bins"])
    steps = np.array([int(r["step"]) for r in records], dtype=np.int64)
    scalar_names = sorted({k for r in records for k in r.get("scalars", {})})
    bin_names = sorted({k for r in records for k in r.get("bins", {})})
    scalars = {n: _column([r.get("scalars", {}).get(n) for r in records]) for n in scalar_names}
    bins: dict[str, np.ndarray] = {}
    for name in bin_names:
        rows = []
        for r in records:
            row = r.get("bins", {}).get(name)
            if row is None or len(row) != num_bins:
                row = [None] * num_bins
            rows.append([np.nan if v is None else v for v in row])
        bins[name] = np.array(rows, dtype=float).reshape(len(records), num_bins)
    evals, _ = _read_jsonl(run_path / EVAL_FILE)
    snap_dir = run_path / SNAPSHOT_DIR
    snapshot_steps = sorted(int(p.stem.split("_")[1]) for p in snap_dir.glob("step_*.json")) if snap_dir.is_dir() else []
    return RunData(run_path, meta, config, steps, scalars, bins, evals, snapshot_steps, torn)


def load_snapshot(path: str | os.PathLike[str], step: int | None = None) -> tuple[int, dict[str, Any]]:
    """Load the controller state saved at ``step`` (latest when None): returns (step, state)."""
    run = read_run(path)
    if not run.snapshot_steps:
        raise RunFormatError(f"{path} has no controller snapshots: the run saved none yet")
    chosen = run.snapshot_steps[-1] if step is None else int(step)
    file = Path(path) / SNAPSHOT_DIR / f"step_{chosen:08d}.json"
    if not file.exists():
        raise RunFormatError(f"{path} has no snapshot for step {chosen}: available {run.snapshot_steps}")
    try:
        payload = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        raise RunFormatError(f"{file} is corrupt: resume from an earlier snapshot") from None
    return int(payload["step"]), decode_state(payload["state"])
