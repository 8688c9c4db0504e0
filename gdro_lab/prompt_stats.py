"""Per-prompt outcome history shared by the per-prompt allocators and the prompt selectors.

One row per prompt id seen (rows in order of first sight, arrays grown by doubling); per row:

- ``successes``, ``trials``: counts discounted by ``decay`` at each new visit,
  s <- decay s + c, n <- decay n + m (decay 1 = every rollout ever, equally weighted);
- ``recent``, ``recent_len``: the last 16 rollout outcomes as bits (bit 0 = the newest) and how
  many there are, so the mean of the most recent rollouts is popcount(recent) / recent_len
  (Knapsack-RL's reward buffer);
- ``total``: rollouts ever seen; ``visits``; ``bin``: the bin of the last visit (-1 = unassigned);
- ``easy_streak`` / ``hard_streak``: consecutive most recent visits whose success rate was
  >= easy_rate / <= hard_rate (GRESO's reward traces reduced to what its skip rule reads).

Pure bookkeeping, no randomness. A prompt twice in one step counts as two visits in batch order.
``track`` names the groups a controller reads ("counts", "recent", "streaks"; "total", "visits" and
"bin" are always kept), so each pays only for its own. The state is a plain dict of the ids and the
arrays (JSON through gdro_lab.runlog.encode_state).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from gdro_lab.feedback import StepFeedback
from gdro_lab.grpo import group_index

RECENT_BITS = 16
_FLOAT = ("successes", "trials")
_INT = ("recent", "recent_len", "total", "visits", "bin", "easy_streak", "hard_streak")


class PromptStats:
    """Outcome history of every prompt seen (module docstring)."""

    def __init__(self, decay: float = 1.0, easy_rate: float = 0.98, hard_rate: float = 0.11,
                 track: tuple[str, ...] = ("counts", "recent", "streaks")):
        self.decay, self.easy_rate, self.hard_rate = float(decay), float(easy_rate), float(hard_rate)
        self.track = frozenset(track)
        self._row: dict[str, int] = {}
        self.arrays: dict[str, np.ndarray] = {name: np.zeros(0) for name in _FLOAT}
        self.arrays.update({name: np.zeros(0, np.int64) for name in _INT})

    def __len__(self) -> int:
        return len(self._row)

    def __getattr__(self, name: str) -> np.ndarray:
        arrays = self.__dict__.get("arrays", {})
        if name in arrays:
            return arrays[name][: len(self.__dict__["_row"])]
        raise AttributeError(name)

    def rows(self, prompt_ids: Sequence[str], add: bool = False) -> np.ndarray:
        """Row of each id (-1 = never seen, unless ``add``: new ids get new rows)."""
        table = self._row
        if add:
            rows = np.array([table.setdefault(pid, len(table)) for pid in prompt_ids], np.int64)
            self._grow(len(table))
            return rows
        get = table.get
        return np.array([get(pid, -1) for pid in prompt_ids], np.int64)

    def _grow(self, size: int) -> None:
        capacity = self.arrays["trials"].size
        if size <= capacity:
            return
        extra = max(size, 2 * capacity, 256) - capacity
        for name, array in self.arrays.items():
            fill = -1 if name == "bin" else 0
            self.arrays[name] = np.concatenate([array, np.full(extra, fill, array.dtype)])

    def record(self, feedback: StepFeedback) -> np.ndarray:
        """Fold one step's outcomes into the history; returns the prompts' rows."""
        rows = self.rows(feedback.prompt_ids, add=True)
        counts = np.asarray(feedback.counts_P, np.int64)
        successes = np.asarray(feedback.successes_R, bool)
        starts = np.cumsum(counts) - counts
        c_P = np.add.reduceat(successes.astype(np.int64), starts)
        bits_P = _newest_bits(successes, counts) if "recent" in self.track else c_P
        bins = np.asarray(feedback.bins_P, np.int64)
        ordered = np.sort(rows)
        if not (ordered[1:] == ordered[:-1]).any():
            self._visit(rows, c_P, counts, bits_P, bins)
            return rows
        todo = np.ones(rows.size, bool)
        while todo.any():  # a prompt twice in one batch: one visit per pass, in batch order
            _, first = np.unique(rows[todo], return_index=True)
            take = np.flatnonzero(todo)[np.sort(first)]
            self._visit(rows[take], c_P[take], counts[take], bits_P[take], bins[take])
            todo[take] = False
        return rows

    def _visit(self, rows: np.ndarray, c_P: np.ndarray, n_P: np.ndarray, bits_P: np.ndarray,
               bins_P: np.ndarray) -> None:
        a = self.arrays
        if "counts" in self.track:
            a["successes"][rows] = self.decay * a["successes"][rows] + c_P
            a["trials"][rows] = self.decay * a["trials"][rows] + n_P
        if "recent" in self.track:
            shift = np.minimum(n_P, RECENT_BITS)
            a["recent"][rows] = ((a["recent"][rows] << shift) | bits_P) & ((1 << RECENT_BITS) - 1)
            a["recent_len"][rows] = np.minimum(a["recent_len"][rows] + n_P, RECENT_BITS)
        a["total"][rows] += n_P
        a["visits"][rows] += 1
        a["bin"][rows] = bins_P
        if "streaks" in self.track:
            rate = c_P / n_P
            a["easy_streak"][rows] = np.where(rate >= self.easy_rate, a["easy_streak"][rows] + 1, 0)
            a["hard_streak"][rows] = np.where(rate <= self.hard_rate, a["hard_streak"][rows] + 1, 0)

    def recent_rate(self, rows: np.ndarray) -> np.ndarray:
        """Mean of each row's most recent (up to 16) rollouts; NaN for rows -1 or with none."""
        rows = np.asarray(rows, np.int64)
        safe = np.maximum(rows, 0)
        length = np.where(rows >= 0, self.arrays["recent_len"][safe] if len(self) else 0, 0)
        ones = np.bitwise_count(self.arrays["recent"][safe]) if len(self) else np.zeros(rows.size)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(length > 0, ones / np.maximum(length, 1), np.nan)

    def take(self, name: str, rows: np.ndarray, missing: float = 0.0) -> np.ndarray:
        """``name`` of each row, ``missing`` for row -1."""
        rows = np.asarray(rows, np.int64)
        if not len(self):
            return np.full(rows.size, missing, float)
        values = self.arrays[name][np.maximum(rows, 0)]
        return np.where(rows >= 0, values, missing)

    def state_dict(self) -> dict[str, Any]:
        size = len(self._row)
        state: dict[str, Any] = {"ids": list(self._row)}
        state.update({name: array[:size].copy() for name, array in self.arrays.items()})
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        ids = [str(i) for i in state["ids"]]
        self._row = {pid: i for i, pid in enumerate(ids)}
        for name in _FLOAT + _INT:
            dtype = float if name in _FLOAT else np.int64
            self.arrays[name] = np.asarray(state[name], dtype).copy()


def _newest_bits(successes_R: np.ndarray, counts_P: np.ndarray) -> np.ndarray:
    """Per prompt, its rollouts' outcomes as bits, the last rollout in bit 0 (only the last 16 kept)."""
    owner = group_index(counts_P)
    ends = np.cumsum(counts_P)
    position = ends[owner] - 1 - np.arange(successes_R.size)  # 0 = the prompt's last rollout
    keep = successes_R & (position < RECENT_BITS)
    weights = np.left_shift(1, position[keep]).astype(float)  # < 2^16: exact in float64
    return np.bincount(owner[keep], weights=weights, minlength=counts_P.size).astype(np.int64)
