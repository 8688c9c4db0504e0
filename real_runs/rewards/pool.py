"""A pool of worker processes that runs one function per task under a hard wall-clock timeout.

A worker that misses its task's deadline is SIGKILLed and replaced, one that dies is replaced; the task
is reported as ``("timeout", None)`` or ``("error", ...)`` and the tasks queued behind it run on other
workers. Tasks run in the worker's main thread (so ``signal.alarm`` works); workers start with
``forkserver`` (Linux) or ``spawn``, never ``fork``. Why not ``ProcessPoolExecutor``, and how:
docs/eval-notes.md#real_runs-rewards-pool.
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

#: Preloaded by the forkserver so replacement math-verify workers start warm.
MATH_TASK_MODULE = "real_runs.rewards.math_task"

#: How long a fresh worker may take to import its module and report ready.
STARTUP_TIMEOUT_S = 120.0


class PoolStartError(RuntimeError):
    """A worker could not start (its module does not import); the message names the module."""


def _worker_main(conn: Connection, func_path: str) -> None:
    """Worker loop: import the task function, say ready, then answer each (id, args) of every chunk."""
    module_name, func_name = func_path.split(":")
    func = getattr(importlib.import_module(module_name), func_name)
    conn.send(("ready", None, 0.0))
    while True:
        try:
            chunk = conn.recv()
        except (EOFError, OSError):
            return
        if chunk is None:
            return
        for task_id, args in chunk:
            try:
                result: tuple[str, Any] = ("ok", func(*args))
            except Exception as err:  # noqa: BLE001 - any failure of a task is reported, never raised
                kind = "timeout" if "timeout" in err.__class__.__name__.lower() else "error"
                result = (kind, f"{err.__class__.__name__}: {str(err)[:200]}")
            conn.send((task_id, result, time.monotonic()))  # the next task starts now


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
    queue: deque = field(default_factory=deque)  # task indices sent and not answered, in the worker's order
    since: float = 0.0  # when the task at the head of the queue started (its deadline: since + timeout)


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
            # Only the first pool's list counts (the server starts once per process), so the
            # math-verify task is always preloaded; a module that fails to import is skipped.
            self._context.set_forkserver_preload(sorted({MATH_TASK_MODULE, func_path.split(":")[0]}))
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

    def map(self, tasks: Sequence[tuple[Any, ...]], chunk: int | None = None,
            affinity: Sequence[Any] | None = None) -> list[tuple[str, Any]]:
        """Run every task (a tuple of arguments); see the class docstring for the results.

        Tasks go ``chunk`` at a time (default 2). ``affinity``: one key per task; tasks with equal keys go
        to the same worker slot, call after call, unless that worker is done and another still has work.
        Without it, neighbouring tasks stay together. Why: docs/eval-notes.md#real_runs-rewards-pool.
        """
        results: list[tuple[str, Any] | None] = [None] * len(tasks)
        count = len(self._workers)
        slots: list[deque] = [deque() for _ in range(count)]
        for index in range(len(tasks)):
            slots[hash(affinity[index]) % count if affinity is not None else index * count // len(tasks)].append(index)
        if chunk is None:
            chunk = 2 if len(tasks) > 2 * count else 1  # with one more sent before the worker runs out
        try:
            while any(slots) or any(worker.queue for worker in self._workers):
                for slot, worker in enumerate(list(self._workers)):
                    if not worker.ready or len(worker.queue) > max(1, chunk // 2):
                        continue
                    own = slots[slot]
                    if own:
                        sent = [own.popleft() for _ in range(min(chunk, len(own)))]
                    else:  # done with its own tasks: take the last ones of the slot with the most left
                        other = max(slots, key=len)
                        if not other:
                            continue
                        sent = [other.pop() for _ in range(min(chunk, len(other)))][::-1]
                    try:
                        worker.conn.send([(index, tasks[index]) for index in sent])
                    except OSError:  # died while idle: retry the tasks on a fresh worker
                        own.extendleft(reversed(sent))
                        self._replace(worker)
                        continue
                    if not worker.queue:
                        worker.since = time.monotonic()
                    worker.queue.extend(sent)
                self._wait_and_collect(results, slots)
        finally:
            # Interrupted (Ctrl-C, an exception): workers still holding tasks of this call are
            # replaced, so a late answer can never be read as the answer to a later call.
            for worker in list(self._workers):
                if worker.queue:
                    self._replace(worker)
        return [r if r is not None else ("error", "lost") for r in results]

    def _wait_and_collect(self, results: list[tuple[str, Any] | None], slots: list[deque]) -> None:
        now = time.monotonic()
        deadlines = [w.since + self.timeout_s for w in self._workers if w.queue]
        deadlines += [w.started + STARTUP_TIMEOUT_S for w in self._workers if not w.ready]
        waits = [w.conn for w in self._workers] + [w.process.sentinel for w in self._workers]
        wait(waits, timeout=max(0.0, min(deadlines, default=now + 1.0) - now))
        for worker in list(self._workers):
            died = False
            while worker.conn.poll():
                try:
                    task_id, result, finished = worker.conn.recv()
                except (EOFError, OSError):
                    died = True
                    break
                if task_id == "ready":
                    worker.ready = True
                elif worker.queue and worker.queue[0] == task_id:
                    results[task_id] = result
                    worker.queue.popleft()
                    worker.since = finished  # the worker went on with its next task then
            if died or not worker.process.is_alive():
                self._fail(worker, results, slots, "error", "worker process died")
            elif worker.queue and time.monotonic() >= worker.since + self.timeout_s:
                self._fail(worker, results, slots, "timeout", None)
            elif not worker.ready and time.monotonic() >= worker.started + STARTUP_TIMEOUT_S:
                raise PoolStartError(f"reward worker for {self.func_path} did not start within "
                                   f"{STARTUP_TIMEOUT_S:.0f} s: check that the module imports")

    def _fail(self, worker: _Worker, results: list[tuple[str, Any] | None], slots: list[deque], status: str,
              value: Any) -> None:
        """The worker's current task gets (status, value); the tasks queued behind it go back to its slot."""
        if worker.queue:
            results[worker.queue.popleft()] = (status, value)
            slots[self._workers.index(worker)].extendleft(reversed(worker.queue))  # never started: run them first
            worker.queue.clear()
        elif not worker.ready:
            raise PoolStartError(f"reward worker for {self.func_path} exited while starting "
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
