"""Text helpers of study reports: ``mean ± half`` formatting, markdown tables, summary JSON.

Pure Python (numpy only for the JSON encoding of arrays); every study formats its numbers with these.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable, Sequence


def fmt(*args: Any, **kwargs: Any) -> str:
    """'m ± h' (or 'm' when the half-width is undefined): ``fmt(mean, half, digits=3, scale=1.0, unit="")``.

    Takes ``*args`` so the common ``fmt(*mean_ci(x), ...)`` and ``fmt(*entry[name], ...)`` type-check."""
    return _fmt(*args, **kwargs)


def _fmt(mean: float, half: float, digits: int = 3, scale: float = 1.0, unit: str = "") -> str:
    if not math.isfinite(float(mean)):
        return "n/a"
    text = f"{float(mean) * scale + 0.0:.{digits}f}{unit}".replace("-0." + "0" * digits, "0." + "0" * digits)
    if math.isfinite(float(half)):
        text += f" ± {float(half) * scale:.{digits}f}{unit}"
    return text


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub markdown table: the header, a rule, one line per row (cells as ``str``)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def write_json(path: Path, payload: Any) -> None:
    """``payload`` as indented JSON (numpy arrays and scalars converted; NaN refused, as in run files)."""
    from gdro_lab.runformat.runlog import to_jsonable
    Path(path).write_text(json.dumps(to_jsonable(payload), indent=1, allow_nan=False) + "\n", encoding="utf-8")
