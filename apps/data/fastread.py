"""A faster reader of run directories for the app: ``steps.jsonl`` parsed by pyarrow's JSON reader.

:func:`read_run_fast` returns the same :class:`~gdro_lab.runformat.runlog.RunData` as
``gdro_lab.runformat.runlog.read_run`` and falls back to it for anything it does not handle exactly
alike; ``tests/apps/data/test_app_fastread.py`` checks that both readers give identical runs.
Detail: docs/app-data-notes.md#apps-data-fastread; speed: docs/benchmarks.md#apps-data-fastread.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from gdro_lab.runformat import runlog
from gdro_lab.runformat.runlog import CONFIG_FILE, SNAPSHOT_DIR, STEPS_FILE, RunData, read_run

#: Larger blocks than pyarrow's 1 MB default: fewer chunks, one type inference for most runs.
BLOCK_BYTES = 16 << 20


class _Unsupported(Exception):
    """The fast path cannot read this file exactly like ``read_run``: use the reference reader."""


def read_run_fast(path: str | os.PathLike[str]) -> RunData:
    """Read a run directory like ``gdro_lab.runformat.runlog.read_run``, parsing ``steps.jsonl`` with pyarrow.

    Falls back to ``read_run`` (same result, or its ``RunFormatError``) on any line the fast path
    cannot mirror exactly.
    """
    run_path = Path(path)
    try:
        meta = runlog._read_meta(run_path)  # noqa: SLF001  (the reference reader's own checks)
        steps_file = run_path / STEPS_FILE
        raw = steps_file.read_bytes() if steps_file.exists() else b""
        steps, scalars, bins, torn = _parse_steps(raw, int(meta["num_bins"]))
    except (_Unsupported, pa.ArrowException, ValueError, TypeError, KeyError, OverflowError):
        return read_run(run_path)
    config = _read_config(run_path)
    evals = runlog.read_evals(run_path)
    snap_dir = run_path / SNAPSHOT_DIR
    snapshot_steps = (sorted(int(p.stem.split("_")[1]) for p in snap_dir.glob("step_*.json"))
                      if snap_dir.is_dir() else [])
    return RunData(run_path, meta, config, steps, scalars, bins, evals, snapshot_steps, torn)


def _read_config(run_path: Path) -> dict[str, Any]:
    """config.json as ``read_run`` reads it (the reference reader raises the error when it is corrupt)."""
    import json

    config_path = run_path / CONFIG_FILE
    if not config_path.exists():
        return {}
    try:
        return json.loads(config_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise _config_error(config_path) from None


def _config_error(config_path: Path) -> runlog.RunFormatError:
    return runlog.RunFormatError(f"{config_path} is corrupt: restore it from the producer's output")


def _parse_steps(raw: bytes, num_bins: int) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray], bool]:
    """(steps (T,), scalars, bins (T, G), torn) of the bytes of a steps.jsonl file."""
    torn = bool(raw) and not raw.endswith(b"\n")
    end = raw.rfind(b"\n") + 1  # a line without its newline is being (or was being) written: dropped
    body = raw[:end]
    if not body.strip():
        if b"\n\n" in body or body.strip(b"\n"):
            raise _Unsupported("blank lines")
        empty = np.zeros(0, dtype=np.int64)
        return empty, {}, {}, torn
    if b"\n\n" in body or body.startswith(b"\n") or b"\r" in body:
        raise _Unsupported("blank lines or CR line ends: the reference reader decides")
    table = _read_table(body)
    if "step" not in table.column_names:
        raise _Unsupported("no step")
    step_col = table.column("step").combine_chunks()
    if step_col.null_count or not (pa.types.is_integer(step_col.type) or pa.types.is_floating(step_col.type)):
        raise _Unsupported("a step that is not a number")
    steps = step_col.cast(pa.int64(), safe=True).to_numpy(zero_copy_only=False).astype(np.int64)
    scalars = _struct_columns(table, "scalars", _scalar_array)
    bins = _struct_columns(table, "bins", lambda column: _bin_array(column, num_bins))
    return steps, scalars, bins, torn


def _read_table(body: bytes) -> pa.Table:
    """The lines as an arrow table, checked in full (pyarrow 26's invalid list offsets:
    docs/app-data-notes.md#apps-data-fastread).
    """
    options = pa_json.ReadOptions(use_threads=False, block_size=BLOCK_BYTES)
    table = pa_json.read_json(pa.BufferReader(body), read_options=options)
    try:
        table.validate(full=True)
    except pa.ArrowInvalid:
        table = pa_json.read_json(pa.BufferReader(body), read_options=options,
                                  parse_options=pa_json.ParseOptions(explicit_schema=table.schema))
        table.validate(full=True)
    return table


def _struct_columns(table: pa.Table, name: str, convert: Any) -> dict[str, np.ndarray]:
    """Each child of the struct column ``name`` converted, by sorted child name (as ``read_run``)."""
    if name not in table.column_names:
        return {}
    column = table.column(name).combine_chunks()
    if pa.types.is_null(column.type):
        return {}
    if not pa.types.is_struct(column.type) or column.null_count:
        raise _Unsupported(f"{name} is not an object on every line")
    out = {}
    for index in range(column.type.num_fields):
        child = column.type.field(index)
        values = pc.struct_field(column, [index])  # a null parent struct makes its children null
        out[child.name] = convert(values)
    return dict(sorted(out.items()))


def _numeric(array: pa.Array) -> np.ndarray:
    """A numeric (or all-null) arrow array as float64 with NaN for nulls."""
    if pa.types.is_null(array.type):
        return np.full(len(array), np.nan)
    if not (pa.types.is_integer(array.type) or pa.types.is_floating(array.type)):
        raise _Unsupported(f"values of type {array.type}")
    return np.asarray(array.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=float)


def _scalar_array(array: pa.Array) -> np.ndarray:
    return _numeric(array)


def _bin_array(array: pa.Array, num_bins: int) -> np.ndarray:
    """A list column as (T, G) floats: a null list or a list of the wrong length is a NaN row."""
    rows = len(array)
    if pa.types.is_null(array.type):
        return np.full((rows, num_bins), np.nan)
    if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
        raise _Unsupported(f"bins of type {array.type}")
    lengths = pc.list_value_length(array).to_numpy(zero_copy_only=False)
    lengths = np.where(np.isnan(lengths.astype(float)), -1, lengths).astype(np.int64)
    flat = _numeric(array.flatten())
    out = np.full((rows, num_bins), np.nan)
    if (lengths == num_bins).all():
        return flat.reshape(rows, num_bins)
    starts = np.concatenate([[0], np.cumsum(np.maximum(lengths, 0))[:-1]])
    for row in np.flatnonzero(lengths == num_bins):
        out[row] = flat[starts[row]:starts[row] + num_bins]
    return out
