"""A pool of worker processes that runs one function per task under a hard wall-clock timeout.

Why not ``concurrent.futures.ProcessPoolExecutor``: it cannot cancel a running call, and a
worker killed by the OS breaks the whole executor. Here each worker owns a pipe; the parent
sends one task at a time to an idle worker and waits with ``multiprocessing.connection.wait``.
A worker that misses its deadline is SIGKILLed and replaced; one that dies mid-call (segfault,
OOM kill) is replaced too; the task is reported as ``("timeout", None)`` or ``("error", ...)``.
The task function runs in the worker's main thread, so libraries that rely on ``signal.alarm``
(math-verify) keep their own soft timeouts.

Workers are started with ``forkserver`` on Linux (the server preloads the task's module once, so
a replacement starts in milliseconds) and ``spawn`` elsewhere; never plain ``fork``, which is
unsafe once the parent holds torch/CUDA or threads.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import sys
import time
import weakref
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Sequence

#: How long a fresh worker may take to import its module and report ready.
STARTUP_TIMEOUT_S = 120.0


def _worker_main(conn: Connection, func_path: str) -> None:
    """Worker loop: import the task function, say ready, then answer (id, args) messages."""
    module_name, func_name = func_path.split(":")
    func = getattr(importlib.import_module(module_name), func_name)
    conn.send(("ready", None))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        task_id, args = message
        try:
            result: tuple[str, Any] = ("ok", func(*args))
        except Exception as err:  # noqa: BLE001 - any failure of a task is reported, never raised
            kind = "timeout" if "timeout" in err.__class__.__name__.lower() else "error"
            result = (kind, f"{err.__class__.__name__}: {str(err)[:200]}")
        conn.send((task_id, result))


def probe(kind: str, seconds: float = 0.0) -> str:
    """A task for checking the pool itself: "sleep" (uninterruptible by alarms), "raise", "exit"
    (the worker dies mid-call), or "pid" (returns the worker's process id)."""
    import os
    import signal

    if kind == "sleep":
        time.sleep(seconds)
    elif kind == "raise":
        raise RuntimeError("probe failure")
    elif kind == "exit":
        os.kill(os.getpid(), signal.SIGKILL)
    return str(os.getpid())


@dataclass(eq=False)
class _Worker:
    process: Any
    conn: Connection
    ready: bool = False
    started: float = field(default_factory=time.monotonic)


def _context() -> Any:
    if sys.platform.startswith("linux"):
        return mp.get_context("forkserver")
    return mp.get_context("spawn")


def _shutdown(workers: list[_Worker]) -> None:
    for worker in workers:
        try:
            worker.conn.send(None)
        except (OSError, ValueError):
            pass
    deadline = time.monotonic() + 1.0
    for worker in workers:
        worker.process.join(max(0.0, deadline - time.monotonic()))
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join(1.0)
        worker.conn.close()
    workers.clear()


class TimedPool:
    """``num_workers`` processes running ``func_path`` (``"module:function"``) with a hard timeout.

    ``map(tasks)`` returns one ``(status, value)`` per task, in order: status is ``"ok"`` (value =
    the function's result), ``"timeout"`` (the worker was killed at ``timeout_s``) or ``"error"``
    (the function raised, or the worker died; value = a short description). It never raises on a
    task and never waits longer than ``timeout_s`` for one task once a worker holds it.
    """

    def __init__(self, func_path: str, num_workers: int = 2, timeout_s: float = 5.0):
        if num_workers < 1:
            raise ValueError(f"num_workers={num_workers}: use at least 1 worker process")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s={timeout_s}: use a positive number of seconds")
        self.func_path = func_path
        self.timeout_s = float(timeout_s)
        self.restarts = 0
        self._context = _context()
        if self._context.get_start_method() == "forkserver":
            self._context.set_forkserver_preload([func_path.split(":")[0]])
        self._workers: list[_Worker] = [self._start() for _ in range(num_workers)]
        self._finalizer = weakref.finalize(self, _shutdown, self._workers)

    def _start(self) -> _Worker:
        parent_conn, child_conn = self._context.Pipe()
        process = self._context.Process(target=_worker_main, args=(child_conn, self.func_path),
                                        daemon=True)
        process.start()
        child_conn.close()  # so the parent sees EOF when the child dies
        return _Worker(process, parent_conn)

    def _replace(self, worker: _Worker) -> None:
        worker.process.kill()
        worker.process.join(1.0)
        worker.conn.close()
        self._workers[self._workers.index(worker)] = self._start()
        self.restarts += 1

    def map(self, tasks: Sequence[tuple[Any, ...]]) -> list[tuple[str, Any]]:
        """Run every task (a tuple of arguments); see the class docstring for the results."""
        results: list[tuple[str, Any] | None] = [None] * len(tasks)
        pending = deque(range(len(tasks)))
        busy: dict[_Worker, tuple[int, float]] = {}
        while pending or busy:
            for worker in list(self._workers):
                if pending and worker.ready and worker not in busy:
                    index = pending.popleft()
                    worker.conn.send((index, tasks[index]))
                    busy[worker] = (index, time.monotonic() + self.timeout_s)
            self._wait_and_collect(busy, results)
        return [r if r is not None else ("error", "lost") for r in results]

    def _wait_and_collect(self, busy: dict[_Worker, tuple[int, float]],
                          results: list[tuple[str, Any] | None]) -> None:
        now = time.monotonic()
        deadlines = [deadline for _, deadline in busy.values()]
        deadlines += [w.started + STARTUP_TIMEOUT_S for w in self._workers if not w.ready]
        waits = [w.conn for w in self._workers] + [w.process.sentinel for w in self._workers]
        wait(waits, timeout=max(0.0, min(deadlines, default=now + 1.0) - now))
        for worker in list(self._workers):
            if worker.conn.poll():
                try:
                    message = worker.conn.recv()
                except (EOFError, OSError):
                    message = None
                if message is not None:
                    if message[0] == "ready":
                        worker.ready = True
                    else:
                        index, result = message
                        results[index] = result
                        busy.pop(worker, None)
                    continue
            if not worker.process.is_alive():
                self._fail(worker, busy, results, "error", "worker process died")
            elif worker in busy and time.monotonic() >= busy[worker][1]:
                self._fail(worker, busy, results, "timeout", None)
            elif not worker.ready and time.monotonic() >= worker.started + STARTUP_TIMEOUT_S:
                raise RuntimeError(f"reward worker for {self.func_path} did not start within "
                                   f"{STARTUP_TIMEOUT_S:.0f} s: check that the module imports")

    def _fail(self, worker: _Worker, busy: dict[_Worker, tuple[int, float]],
              results: list[tuple[str, Any] | None], status: str, value: Any) -> None:
        if worker in busy:
            index, _ = busy.pop(worker)
            results[index] = (status, value)
        elif not worker.ready:
            raise RuntimeError(f"reward worker for {self.func_path} exited while starting "
                               f"(exit code {worker.process.exitcode}): check that the module imports")
        self._replace(worker)

    @property
    def pids(self) -> list[int]:
        """Process ids of the current workers (tests kill one to check recovery)."""
        return [int(w.process.pid) for w in self._workers]

    def close(self) -> None:
        """Stop the workers (idempotent)."""
        self._finalizer()

    def __enter__(self) -> "TimedPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
