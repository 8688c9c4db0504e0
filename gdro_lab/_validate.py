"""Small validation helpers shared by every config dataclass.

Every check raises :class:`ConfigError` with one line that names the field, the
value it got and what is allowed, so a bad config never surfaces as a traceback
deep inside an update rule.
"""

from __future__ import annotations

import difflib
import math
from typing import Any, Sequence

import numpy as np


class ConfigError(ValueError):
    """A configuration value is out of range; the message names field and fix."""


def require(condition: bool, owner: str, field: str, value: Any, allowed: str) -> None:
    """Raise ConfigError('<owner>.<field>=<value> is invalid: must be <allowed>')."""
    if not condition:
        raise ConfigError(f"{owner}.{field}={value!r} is invalid: must be {allowed}")


def require_range(owner: str, field: str, value: float, lo: float | None = None,
                  hi: float | None = None, lo_open: bool = False, hi_open: bool = False) -> None:
    """Check lo <= value <= hi (open ends when asked) and that value is finite."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and lo is not None:
        ok = value > lo if lo_open else value >= lo
    if ok and hi is not None:
        ok = value < hi if hi_open else value <= hi
    left = "(" if lo_open else "["
    right = ")" if hi_open else "]"
    allowed = f"a finite number in {left}{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}{right}"
    require(ok, owner, field, value, allowed)


def require_int(owner: str, field: str, value: Any, lo: int, hi: int | None = None) -> None:
    """Check value is an integer (not a bool) with lo <= value (<= hi when given)."""
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    ok = ok and value >= lo and (hi is None or value <= hi)
    allowed = f"an integer >= {lo}" if hi is None else f"an integer in [{lo}, {hi}]"
    require(bool(ok), owner, field, value, allowed)


def require_choice(owner: str, field: str, value: str, choices: Sequence[str]) -> None:
    """Check value is one of choices (the closest one suggested first)."""
    close = difflib.get_close_matches(value, [str(c) for c in choices], n=1) if isinstance(value, str) else []
    hint = f" (did you mean {close[0]!r}?)" if close and value not in choices else ""
    require(value in choices, owner, field, value, "one of " + ", ".join(repr(c) for c in choices) + hint)


def require_edges(owner: str, field: str, edges: Sequence[float]) -> None:
    """Inner bin edges: non-empty, strictly increasing, inside (0, 1)."""
    numbers = isinstance(edges, (tuple, list)) and all(
        isinstance(e, (int, float, np.floating, np.integer)) and not isinstance(e, bool) for e in edges)
    ok = numbers and len(edges) >= 1 and all(0.0 < e < 1.0 for e in edges) and all(
        a < b for a, b in zip(edges[:-1], edges[1:]))
    require(ok, owner, field, edges, "a strictly increasing tuple of numbers inside (0, 1)")
