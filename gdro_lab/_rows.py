"""Per-row reductions of small (G, A) tables, faster than numpy's reduce along axis 1.

:func:`row_max` and :func:`row_min` equal the reduce bit for bit; :func:`row_sum` may differ in the
last bits, so it is used only where no earlier value must be reproduced exactly. Timings:
docs/benchmarks.md#gdro_lab-_rows.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["cached_arange", "row_max", "row_min", "row_starts", "row_sum"]


@functools.lru_cache(maxsize=32)
def row_starts(rows: int, width: int) -> np.ndarray:
    """arange(0, rows * width, width) (read-only, cached): the flat index of each row's first entry."""
    out = np.arange(0, rows * width, width)
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=32)
def cached_arange(size: int) -> np.ndarray:
    """arange(size) (read-only, cached)."""
    out = np.arange(size)
    out.flags.writeable = False
    return out


def row_max(values_GA: np.ndarray) -> np.ndarray:
    """max over each row of a 2-D float array (rows >= 1, width >= 1), shape (G, 1)."""
    rows, width = values_GA.shape
    return np.maximum.reduceat(values_GA.ravel(), row_starts(rows, width))[:, None]


def row_min(values_GA: np.ndarray) -> np.ndarray:
    """min over each row of a 2-D float array (rows >= 1, width >= 1), shape (G,); = values_GA.min(axis=1) exactly."""
    rows, width = values_GA.shape
    return np.minimum.reduceat(values_GA.ravel(), row_starts(rows, width))


def row_sum(values_GA: np.ndarray) -> np.ndarray:
    """Sum of each row of a 2-D float array (rows >= 1, width >= 1) by reduceat, shape (G,)."""
    rows, width = values_GA.shape
    return np.add.reduceat(values_GA.ravel(), row_starts(rows, width))
