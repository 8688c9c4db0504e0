"""Progress of a long phase: :func:`phase` when its length is not known ahead (a model load, a
training step), a line when it starts, a heartbeat line while it runs, its seconds when it ends;
:class:`Counter` when it has a known count of items (prompts, runs), a line per item done with the
time so far and an estimate of the time left; :class:`BatchProgress`, an evaluation's lines per batch
and per benchmark (``gdro eval`` and the trainer's evaluations).

    with phase("rehearsal step 1: ..."):      # gdro: rehearsal step 1: ... started / still running
        main(cfg, stop_after=1)               # after 10 s / done in 41 s   (stderr, flushed)

Plain lines, no terminal control codes; the heartbeat is a daemon thread. Detail:
docs/train-notes.md#real_runs-progress.
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

if TYPE_CHECKING:
    from real_runs.types import Problem

#: Seconds between two heartbeat lines of one phase (read when a phase starts: a test may lower it).
EVERY_S = 10.0


def to_stderr(line: str) -> None:
    """A progress line on stderr, flushed (the default ``out`` of every reporter here)."""
    print(line, file=sys.stderr, flush=True)


@contextmanager
def phase(label: str, *, every_s: float | None = None, out: Callable[[str], None] = to_stderr,
          prefix: str = "gdro: ") -> Iterator[None]:
    """Announce ``label``, print a heartbeat every ``every_s`` seconds (default :data:`EVERY_S`) while
    the block runs, then ``done in N s`` (or ``failed after N s`` when it raises; the exception propagates)."""
    every_s = EVERY_S if every_s is None else every_s
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


def duration(seconds: float) -> str:
    """``41 s``, ``12 min``, ``3.5 h``: a time for a progress line."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Counter:
    """``done/total`` of a phase with a known count, one line per :meth:`advance`:

        gdro eval: 128/1,000 prompts, 3.2 min so far, about 22 min left

    The estimate is the time so far per item times the items left (none before the first item).
    ``clock`` is injectable so a test sees the estimate without waiting."""

    def __init__(self, label: str, total: int, unit: str, *, out: Callable[[str], None] = to_stderr,
                 prefix: str = "gdro: ", clock: Callable[[], float] = time.perf_counter):
        self.label, self.total, self.unit, self.out, self.prefix, self.clock = label, total, unit, out, prefix, clock
        self.done = 0
        self.started = clock()

    def line(self, note: str = "") -> str:
        """The current count as a line (not printed)."""
        elapsed = self.clock() - self.started
        text = f"{self.prefix}{self.label}{': ' if self.label else ''}{self.done:,}/{self.total:,} {self.unit}"
        if self.done:
            left = elapsed / self.done * max(self.total - self.done, 0)
            text += f", {duration(elapsed)} so far" + (f", about {duration(left)} left" if self.done < self.total
                                                       else "")
        return text + (f" ({note})" if note else "")

    def start(self, note: str = "") -> None:
        """Print ``0/total`` (before the first item's work, so a long first item is not silent)."""
        self.out(self.line(note))

    def advance(self, count: int = 1, note: str = "") -> None:
        """``count`` more items done; print the count, the time so far and the estimate left."""
        self.done += count
        self.out(self.line(note))


class BatchProgress:
    """The lines of :func:`real_runs.eval_scoring.generate_and_score`: the plan and ``0/N`` before the first batch generates,
    ``benchmark B: 0/N prompts`` when a benchmark's first batch starts, and after each batch the prompts
    done of all, the time so far and an estimate of the time left (:class:`Counter`),
    and ``benchmark B: N/N prompts done`` when its last prompt is scored."""

    def __init__(self, problems: Sequence[Problem], n: int, batch_prompts: int, log: Callable[[str], Any],
                 clock: Callable[[], float], prefix: str = "gdro eval: "):
        self.log, self.prefix = log, prefix
        self.sizes: dict[str, int] = {}
        for problem in problems:
            self.sizes[problem.source] = self.sizes.get(problem.source, 0) + 1
        self.done = dict.fromkeys(self.sizes, 0)
        self.batches, self.batch = -(-len(problems) // batch_prompts), 0
        self.counter = Counter("", len(problems), "prompts", out=log, prefix=self.prefix, clock=clock)
        log(f"{self.prefix}{len(problems):,} prompts x {n} samples in {self.batches:,} batches of up to "
            f"{batch_prompts}: " + ", ".join(f"{name} {size:,}" for name, size in self.sizes.items()))

    def begin(self, part: Sequence[Problem]) -> None:
        self.batch += 1
        if self.batch == 1:
            self.counter.start(f"batch 1/{self.batches} generating")
        for name in dict.fromkeys(p.source for p in part):
            if self.done[name] == 0:
                self.log(f"{self.prefix}benchmark {name}: 0/{self.sizes[name]:,} prompts (batch {self.batch}/"
                         f"{self.batches})")

    def end(self, part: Sequence[Problem]) -> None:
        names = list(dict.fromkeys(p.source for p in part))
        for problem in part:
            self.done[problem.source] += 1
        where = ", ".join(f"{name} {self.done[name]:,}/{self.sizes[name]:,}" for name in names)
        self.counter.advance(len(part), f"batch {self.batch}/{self.batches}; {where}")
        for name in names:
            if self.done[name] == self.sizes[name]:
                self.log(f"{self.prefix}benchmark {name}: {self.sizes[name]:,}/{self.sizes[name]:,} prompts done")
