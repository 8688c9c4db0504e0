"""apps.data.filecache.FileCache against a plain model of its rule: a value per key, read on a miss,
moved to the end on every use, and the oldest dropped while more than ``max_entries`` values (or more
than ``max_bytes`` of them) are kept and more than one is; a read that fails keeps nothing."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.data.filecache import FileCache


class Model:
    """The rule written as a list: (key, size) oldest first."""

    def __init__(self, max_entries: int, max_bytes: int | None) -> None:
        self.kept: list[tuple[str, int]] = []
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self.reads = 0

    def get(self, key: str, size: int) -> None:
        found = [entry for entry in self.kept if entry[0] == key]
        if found:
            self.kept.remove(found[0])
            self.kept.append(found[0])
            return
        self.reads += 1
        self.kept.append((key, size))
        while len(self.kept) > 1 and (len(self.kept) > self.max_entries
                                      or (self.max_bytes is not None and sum(s for _, s in self.kept) > self.max_bytes)):
            self.kept.pop(0)


SIZES = {key: size for key, size in zip("abcdefgh", (1, 5, 2, 7, 3, 3, 9, 1))}


@settings(max_examples=200, deadline=None)
@given(reads=st.lists(st.sampled_from(sorted(SIZES)), max_size=40), max_entries=st.integers(1, 6),
       max_bytes=st.one_of(st.none(), st.integers(1, 20)))
def test_the_cache_keeps_what_the_model_keeps(reads: list[str], max_entries: int, max_bytes: int | None) -> None:
    loads: list[str] = []

    def load(key: str) -> dict[str, Any]:
        loads.append(key)
        return {"key": key, "size": SIZES[key]}

    sized = {"max_bytes": max_bytes, "size": lambda value: value["size"]} if max_bytes is not None else {}
    cache: FileCache[str, dict[str, Any]] = FileCache(lambda key: key, load, max_entries=max_entries, **sized)
    model = Model(max_entries, max_bytes)
    for key in reads:
        assert cache.get(key) == {"key": key, "size": SIZES[key]}
        model.get(key, SIZES[key])
    assert len(loads) == model.reads, "a value is read again only after it left the cache"
    assert len(cache) == len(model.kept)
    assert cache.held_bytes == (sum(size for _, size in model.kept) if max_bytes is not None else 0)
    before = len(loads)
    for key, _ in model.kept:  # what the model keeps is served without a read
        cache.get(key)
    assert len(loads) == before


def test_a_failed_read_keeps_nothing_and_get_many_keeps_the_order() -> None:
    calls: list[str] = []
    threads: set[str] = set()

    def load(key: str) -> str:
        calls.append(key)
        threads.add(threading.current_thread().name)
        if key.startswith("bad"):
            raise KeyError(key)
        return key.upper()

    cache: FileCache[str, str] = FileCache(lambda key: key, load, max_entries=10, thread_name="reader")
    with pytest.raises(KeyError):
        cache.get("bad1")
    assert len(cache) == 0
    keys = ["a", "bad2", "b", "c", "bad1"]
    got = cache.get_many_or_errors(keys, (KeyError,), workers=3)
    assert [value if isinstance(value, str) else type(value) for value in got] == ["A", KeyError, "B", "C", KeyError]
    assert any(name.startswith("reader") for name in threads), "misses of a batch are read in the cache's threads"
    assert cache.get_many(["c", "a", "b"]) == ["C", "A", "B"]
    assert calls.count("a") == 1 and calls.count("bad1") == 2, "kept values are not read again; failures are"
    with pytest.raises(KeyError):
        cache.get_many(["a", "bad3"])
    cache.clear()
    assert len(cache) == 0 and cache.get("a") == "A" and calls.count("a") == 2


def test_bytes_need_a_size() -> None:
    with pytest.raises(ValueError, match="together"):
        FileCache(lambda key: key, str, max_entries=2, max_bytes=10)


def test_a_key_read_twice_at_once_is_counted_once_and_other_errors_are_raised() -> None:
    """Two sessions may miss the same run at the same time: both read it, the cache holds it once (its
    bytes counted once). Only the named kinds of failure stand in a batch's place."""
    depth = []

    def load(key: str) -> str:
        if key == "v":
            raise ValueError(key)
        depth.append(key)
        if len(depth) == 1:
            cache.get(key)  # another reader misses the same key while this one reads it
        return key

    cache: FileCache[str, str] = FileCache(lambda key: key, load, max_entries=4, max_bytes=100, size=len)
    cache.get("abc")
    assert len(depth) == 2 and len(cache) == 1 and cache.held_bytes == 3
    with pytest.raises(ValueError):
        cache.get_many_or_errors(["abc", "v"], (KeyError,))
