"""One cache for what the app reads from run folders: a value per key, read again when the key changes.

The app keeps three things per run folder for every session of a server: the run list's entry
(:data:`apps.data.listing.INFO_CACHE`), the whole run (:data:`apps.data.loading.RUN_CACHE`) and the
run table's scalars (:data:`apps.data.runcolumns.SCALAR_CACHE`). Each is a :class:`FileCache`: its key
holds the folder and a signature of the files read (their sizes and modification times), so a run that
grows gets a new key and is read again; the least recently used values leave first once the cache
holds ``max_entries`` values (or ``max_bytes``, for a cache that sizes its values); a value that could
not be read is not kept. Misses of :meth:`FileCache.get_many` are read by a few threads at once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Generic, Hashable, Sequence, TypeVar

T = TypeVar("T")
V = TypeVar("V")
R = TypeVar("R")


class FileCache(Generic[T, V]):
    """``load(item)`` per ``key(item)``, least recently used first out (thread-safe, shared by sessions).

    ``size(value)`` (with ``max_bytes``) bounds the memory held as well as the count. An exception of
    ``load`` reaches the caller and nothing is kept for that key."""

    def __init__(self, key: Callable[[T], Hashable], load: Callable[[T], V], *, max_entries: int,
                 max_bytes: int | None = None, size: Callable[[V], int] | None = None,
                 thread_name: str = "gdro-read") -> None:
        if (max_bytes is None) != (size is None):
            raise ValueError("give max_bytes and size together")
        self.key, self.load = key, load
        self.max_entries, self.max_bytes, self.size = max_entries, max_bytes, size
        self.thread_name = thread_name
        self._values: OrderedDict[Hashable, V] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, item: T) -> V:
        """The value of ``item``: the kept one when its key is unchanged, else read now."""
        key = self.key(item)
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
        value = self.load(item)
        with self._lock:
            if key not in self._values and self.size is not None:
                self._bytes += self.size(value)
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > 1 and (len(self._values) > self.max_entries or (
                    self.max_bytes is not None and self._bytes > self.max_bytes)):
                _, dropped = self._values.popitem(last=False)
                if self.size is not None:
                    self._bytes -= self.size(dropped)
        return value

    def get_many(self, items: Sequence[T], workers: int = 4) -> list[V]:
        """The values of ``items`` in order, misses read in ``workers`` threads."""
        return self._map(self.get, items, workers)

    def get_many_or_errors(self, items: Sequence[T], errors: tuple[type[Exception], ...],
                           workers: int = 4) -> list[V | Exception]:
        """As :meth:`get_many`, with an exception of one of the types ``errors`` in its item's place."""
        def one(item: T) -> V | Exception:
            try:
                return self.get(item)
            except errors as err:
                return err

        return self._map(one, items, workers)

    def _map(self, read: Callable[[T], R], items: Sequence[T], workers: int) -> list[R]:
        if len(items) <= 1:
            return [read(item) for item in items]
        with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix=self.thread_name) as pool:
            return list(pool.map(read, items))

    def clear(self) -> None:
        """Forget every value (the next request reads again)."""
        with self._lock:
            self._values.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._values)

    @property
    def held_bytes(self) -> int:
        """The summed ``size`` of the values kept (0 for a cache that does not size them)."""
        return self._bytes
