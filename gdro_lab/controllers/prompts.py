"""Prompt ids interned once to dense integer indices, so per-prompt state is arrays.

A :class:`PromptIndex` maps id -> index 0..N-1, append-only; steps move int64 arrays and
:class:`PerPromptState` keeps arrays indexed by it. String ids keep working (interned on the fly).
Sharing the run's index (``build(..., prompts=index)``) is a speed-up, never a correctness condition;
snapshots save ids next to rows, so they load into any index. Detail:
docs/core-controllers-notes.md#gdro_lab-controllers-prompts.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

from gdro_lab._validate import ConfigError

__all__ = ["PerPromptState", "PromptIndex", "is_index_array"]


def is_index_array(values: Any) -> bool:
    """True for a numpy array of integers (prompt indices); False for string ids (any sequence)."""
    return isinstance(values, np.ndarray) and values.dtype.kind in "iu"


class PromptIndex:
    """Append-only interning of stable prompt ids (str) to dense int64 indices 0..N-1.

    ``intern(ids)`` returns each id's index, appending ids never seen; ``lookup(ids)`` returns -1
    for them instead. ``ids_of(index_P)`` maps back. The index of an id never changes.
    """

    def __init__(self, ids: Iterable[str] = ()):
        self._index: dict[str, int] = {}
        self._ids: list[str] = []
        self.intern(list(ids))

    def __len__(self) -> int:
        return len(self._ids)

    def __repr__(self) -> str:
        return f"PromptIndex({len(self._ids)} ids)"

    @property
    def ids(self) -> Sequence[str]:
        """Every interned id, in index order (read-only view)."""
        return tuple(self._ids)

    def intern(self, ids: Sequence[str]) -> np.ndarray:
        """Index of each id (int64, shape (P,)); ids never seen are appended. Ids must be strings."""
        index = self._index
        try:
            return np.array([index[pid] for pid in ids], dtype=np.int64)
        except (KeyError, TypeError):
            pass
        out = np.empty(len(ids), np.int64)
        for i, pid in enumerate(ids):
            row = index.get(pid) if isinstance(pid, str) else None
            if row is None:
                if not isinstance(pid, str):
                    raise ConfigError(f"prompt ids must be strings, got {type(pid).__name__} {pid!r}: pass str ids "
                                      "(or int indices of a PromptIndex)")
                row = index[pid] = len(self._ids)
                self._ids.append(pid)
            out[i] = row
        return out

    def lookup(self, ids: Sequence[str]) -> np.ndarray:
        """Index of each id (int64); -1 for ids never interned (nothing is added)."""
        get = self._index.get
        return np.array([get(pid, -1) for pid in ids], dtype=np.int64)

    def ids_of(self, index_P: Sequence[int] | np.ndarray) -> list[str]:
        """The ids of the given indices."""
        ids = self._ids
        return [ids[i] for i in np.asarray(index_P, np.int64).tolist()]

    def check(self, index_P: Any, owner: str = "PromptIndex") -> np.ndarray:
        """``index_P`` as a 1-D int64 array of valid indices (0 <= i < len); else a one-line ConfigError."""
        array = np.asarray(index_P)
        if array.dtype.kind not in "iu" or array.ndim != 1:
            raise ConfigError(f"{owner}: prompt indices have dtype {array.dtype} and shape {array.shape}: "
                              "must be a 1-D array of integers (or pass string ids)")
        array = array.astype(np.int64, copy=False)
        if array.size and np.maximum.reduce(array.view(np.uint64)) >= len(self._ids):  # negatives wrap to huge values
            bad = array[(array < 0) | (array >= len(self._ids))][0]
            raise ConfigError(f"{owner}: prompt index {bad} is outside this PromptIndex (0..{len(self._ids) - 1}): "
                              "pass indices of the index the controller was built with (build(..., prompts=index))")
        return array

    def state_dict(self) -> dict[str, Any]:
        return {"ids": list(self._ids)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the ids; an index that already holds ids must hold them as a prefix of the saved ones."""
        ids = [str(pid) for pid in state["ids"]]
        if self._ids != ids[:len(self._ids)]:
            raise ConfigError("PromptIndex.load_state_dict: the saved ids do not extend this index's ids "
                              "(different data?): load into a fresh PromptIndex")
        self.intern(ids[len(self._ids):])


class PerPromptState:
    """Mixin for controllers that keep per-prompt state in arrays indexed by a :class:`PromptIndex`.

    ``self.prompts`` is the controller's own index until ``bind_prompts`` shares the run's.
    ``_prompt_rows(arg)`` turns the ``prompt_ids`` argument of a controller call (string ids, or
    int indices of ``self.prompts``) into rows; ``_prompt_rows(arg, register=False)`` gives -1
    for string ids never seen instead of interning them.
    """

    prompts: PromptIndex

    def _init_prompts(self) -> None:
        self.prompts = PromptIndex()

    def _tracks_prompts(self) -> bool:
        """Whether any per-prompt state is held (then the index can no longer be swapped)."""
        raise NotImplementedError

    def bind_prompts(self, prompts: PromptIndex) -> None:
        """Share the run's index (before any prompt is tracked; the state is then indexed by it)."""
        if not isinstance(prompts, PromptIndex):
            raise ConfigError(f"{type(self).__name__}.bind_prompts: got {type(prompts).__name__}: must be a PromptIndex")
        if prompts is not self.prompts and self._tracks_prompts():
            raise ConfigError(f"{type(self).__name__}.bind_prompts: the controller already tracks prompts: bind the "
                              "index before the first update (or load_state_dict after binding)")
        self.prompts = prompts

    def _prompt_rows(self, prompt_ids: Any, register: bool = True) -> np.ndarray:
        if is_index_array(prompt_ids):
            return self.prompts.check(prompt_ids, type(self).__name__)
        return self.prompts.intern(prompt_ids) if register else self.prompts.lookup(prompt_ids)
