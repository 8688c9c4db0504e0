"""Progress of a long phase whose length is not known ahead (a model load, a generation call, an
evaluation): a line when it starts, a heartbeat line while it runs, its seconds when it ends.

    with phase("rehearsal step 1: ..."):      # gdro: rehearsal step 1: ... started / still running
        main(cfg, stop_after=1)               # after 30 s / done in 41 s   (stderr, flushed)

Plain lines, no terminal control codes; the heartbeat is a daemon thread. Detail:
docs/train-notes.md#real_runs-progress.
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

#: Seconds between two heartbeat lines of one phase.
EVERY_S = 30.0


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextmanager
def phase(label: str, *, every_s: float = EVERY_S, out: Callable[[str], None] = _stderr,
          prefix: str = "gdro: ") -> Iterator[None]:
    """Announce ``label``, print a heartbeat every ``every_s`` seconds while the block runs, then
    ``done in N s`` (or ``failed after N s`` when it raises; the exception propagates)."""
    start = time.perf_counter()
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every_s):
            out(f"{prefix}{label} still running after {time.perf_counter() - start:.0f} s")

    out(f"{prefix}{label} started")
    thread = threading.Thread(target=beat, name=f"progress: {label}", daemon=True)
    thread.start()
    ok = False
    try:
        yield
        ok = True
    finally:
        stop.set()
        thread.join()
        seconds = time.perf_counter() - start
        out(f"{prefix}{label} {'done in' if ok else 'failed after'} {seconds:.0f} s")
