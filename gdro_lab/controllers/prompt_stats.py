"""Per-prompt outcome history shared by the per-prompt allocators and the prompt selectors.

Arrays indexed by the prompt's row in a :class:`gdro_lab.controllers.prompts.PromptIndex`, grown by
doubling: discounted ``successes`` / ``trials`` (s <- decay s + c), the last 16 outcomes as bits
(``recent``), ``total``, ``visits``, the last ``bin`` and GRESO's ``easy_streak`` / ``hard_streak``.
Pure bookkeeping, no randomness; ``track`` names the groups a controller reads; ``extra`` adds float arrays
a controller writes itself (grown and saved with the rest). The state is a dict
of the seen prompts' ids and rows, so it loads into any numbering of the same ids. Per field:
docs/core-controllers-notes.md#gdro_lab-controllers-prompt_stats.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gdro_lab.controllers.feedback import StepFeedback
from gdro_lab.controllers.prompts import PerPromptState

RECENT_BITS = 16
_FLOAT = ("successes", "trials")
_INT = ("recent", "recent_len", "total", "visits", "bin", "easy_streak", "hard_streak")


class PromptStats(PerPromptState):
    """Outcome history of every prompt seen (module docstring)."""

    def __init__(self, decay: float = 1.0, easy_rate: float = 0.98, hard_rate: float = 0.11,
                 track: tuple[str, ...] = ("counts", "recent", "streaks"), extra: tuple[str, ...] = ()):
        self.decay, self.easy_rate, self.hard_rate = float(decay), float(easy_rate), float(hard_rate)
        self.track = frozenset(track)
        self._init_prompts()
        self.arrays: dict[str, np.ndarray] = {name: np.zeros(0) for name in (*_FLOAT, *extra)}
        self.arrays.update({name: np.zeros(0, np.int64) for name in _INT})

    def _tracks_prompts(self) -> bool:
        return bool(np.any(self.arrays["visits"] > 0))

    def __len__(self) -> int:
        """Prompts seen."""
        return int(np.count_nonzero(self.arrays["visits"]))

    def __getattr__(self, name: str) -> np.ndarray:
        arrays = self.__dict__.get("arrays", {})
        if name in arrays:
            return arrays[name]
        raise AttributeError(name)

    def rows(self, prompt_ids: Any, add: bool = False) -> np.ndarray:
        """Row of each prompt (string ids or indices of ``self.prompts``); -1 for a string id the index
        never held, unless ``add`` (then it is interned). Rows of prompts not seen yet are valid rows."""
        rows = self._prompt_rows(prompt_ids, register=add)
        self._grow(len(self.prompts))
        return rows

    def seen(self, rows: np.ndarray) -> np.ndarray:
        """Whether each row (-1 allowed) has a recorded visit."""
        rows = np.asarray(rows, np.int64)
        visits = self.arrays["visits"]
        return (rows >= 0) & (visits[np.maximum(rows, 0)] > 0) if visits.size else np.zeros(rows.size, bool)

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
        rows = feedback.index_in(self.prompts)
        self._grow(len(self.prompts))
        counts = np.asarray(feedback.counts_P, np.int64)
        c_P = feedback._successes_P  # cached per step by StepFeedback (read only)
        bits_P = _newest_bits(feedback) if "recent" in self.track else c_P
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
        seen = self.seen(rows)
        safe = np.where(seen, rows, 0)
        length = np.where(seen, self.arrays["recent_len"][safe], 0) if seen.any() else np.zeros(rows.size)
        ones = np.bitwise_count(self.arrays["recent"][safe]) if seen.any() else np.zeros(rows.size)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(length > 0, ones / np.maximum(length, 1), np.nan)

    def take(self, name: str, rows: np.ndarray, missing: float = 0.0) -> np.ndarray:
        """``name`` of each row, ``missing`` for rows not seen (or -1)."""
        rows = np.asarray(rows, np.int64)
        seen = self.seen(rows)
        if not seen.any():
            return np.full(rows.size, missing, float)
        return np.where(seen, self.arrays[name][np.where(seen, rows, 0)], missing)

    def state_dict(self) -> dict[str, Any]:
        tracked = np.flatnonzero(self.arrays["visits"] > 0)
        state: dict[str, Any] = {"ids": self.prompts.ids_of(tracked)}
        state.update({name: array[tracked].copy() for name, array in self.arrays.items()})
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        rows = self.prompts.intern([str(i) for i in state["ids"]])
        for name in self.arrays:
            self.arrays[name] = np.full(0, 0, self.arrays[name].dtype)
        self._grow(len(self.prompts))
        for name in self.arrays:
            self.arrays[name][rows] = np.asarray(state[name], self.arrays[name].dtype)


_POW2 = 2.0 ** np.arange(RECENT_BITS)


def _newest_bits(feedback: StepFeedback) -> np.ndarray:
    """Per prompt, its rollouts' outcomes as bits, the last rollout in bit 0 (only the last 16 kept)."""
    owner = feedback.group_R
    counts = np.asarray(feedback.counts_P, np.int64)
    position = (feedback.starts_P + counts)[owner] - 1 - np.arange(owner.size)  # 0 = the prompt's last rollout
    keep = np.asarray(feedback.successes_R, bool) & (position < RECENT_BITS)
    return np.bincount(owner[keep], weights=_POW2[position[keep]], minlength=counts.size).astype(np.int64)
