"""The classifier's per-prompt ring buffers of recent visits (gdro_lab.controllers.difficulty, Eq. 10).

One row per prompt index (a :class:`~gdro_lab.controllers.prompts.PromptIndex`), so a step's visits are a
gather and a scatter on one int64 buffer; see :class:`History`.
"""

from __future__ import annotations

import numpy as np

from gdro_lab._rows import cached_arange

__all__ = ["History"]


class History:
    """Ring buffers of the last H visits, one row per prompt index (rows grow by doubling).

    ``visits`` (ever; ring position visits mod H), ``bins`` (-1 = never visited), ``sums`` (running window
    sum of pass@k, saved in the state), ``passk``, ``successes`` and ``rollouts`` (n = 0: empty slot) are
    views of one int64 buffer. The layout: docs/core-controllers-notes.md#gdro_lab-controllers-visit_history.
    """

    def __init__(self, window: int, rows: int = 0):
        self.window = window
        self.width = 4 + 2 * window
        self._allocate(rows)

    def _allocate(self, rows: int, old: np.ndarray | None = None) -> None:
        buffer = np.zeros((rows, self.width), np.int64)
        buffer[:, 1] = -1
        if old is not None:
            buffer[: old.shape[0]] = old
        self.buffer = buffer
        self.flat = buffer.reshape(-1)
        self.flat_passk = buffer.view(np.float64).reshape(-1)
        self.visits = buffer[:, 0]
        self.bins = buffer[:, 1]
        self.mark = buffer[:, 2]
        self.sums = buffer[:, 3].view(np.float64)
        self.passk = buffer[:, 4::2].view(np.float64)

    def slots(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(c, n) of each slot of the given rows (n = 0: an empty slot), int32, shape (len(rows), H)."""
        packed = self.buffer[rows, 5::2]
        return (packed & 0xFFFFFFFF).astype(np.int32), (packed >> 32).astype(np.int32)

    @property
    def length(self) -> np.ndarray:
        """Visits in each prompt's window, min(visits, H)."""
        return np.minimum(self.visits, self.window)

    @property
    def position(self) -> np.ndarray:
        """Next slot of each prompt's ring buffer, visits mod H."""
        return self.visits % self.window

    def grow(self, rows: int) -> None:
        capacity = self.buffer.shape[0]
        if rows > capacity:
            self._allocate(max(rows, 2 * capacity, 256), self.buffer)

    def set_slots(self, rows: np.ndarray, passk_RH: np.ndarray, successes_RH: np.ndarray,
                  rollouts_RH: np.ndarray) -> None:
        """Write whole windows (slot order) of the given rows (their sums: call ``set_sums``)."""
        self.passk[rows] = passk_RH
        self.buffer[rows, 5::2] = (rollouts_RH.astype(np.int64) << 32) | successes_RH.astype(np.int64)

    def record(self, rows: np.ndarray, passk: np.ndarray, successes: np.ndarray, counts: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
        """Write one visit for each of ``rows`` (distinct) into the ring buffers; returns the new
        (lengths, window sums). An empty slot holds 0.0, so the first H visits evict nothing."""
        window = self.window
        flat_passk = self.flat_passk
        start = rows * self.width
        visits = self.flat.take(start)
        slot = visits % window * 2 + start + 4  # the slot's pass@k; its (n, c) follows it
        sums = flat_passk.take(start + 3) + (passk - flat_passk.take(slot))
        flat_passk[slot] = passk
        flat_passk[start + 3] = sums
        self.flat[slot + 1] = (counts << 32) | successes
        visits += 1
        self.flat[start] = visits
        return np.minimum(visits, window), sums

    def has_duplicates(self, rows: np.ndarray) -> bool:
        """Whether an index occurs twice in ``rows``."""
        if rows.size < 2:
            return False
        order = cached_arange(rows.size)
        self.mark[rows] = order
        return bool(np.logical_or.reduce(self.mark[rows] != order))
