"""One writer per run directory: an exclusive ``flock`` on ``RUN_DIR/writer.lock``.

``gdro train`` holds the lock from the moment it creates (or resumes) a run until it exits; a
second ``gdro train --resume`` on a run still being written is refused in one line before it
touches anything (without the lock, the resume rewrote ``steps.jsonl`` by rename, the first
process kept appending to the deleted file, and both wrote checkpoints into one folder).

The lock is the kernel's (``fcntl.flock``), not the file's existence: it dies with the process
that holds it (a crash, SIGKILL or a reboot leaves no stale lock to clean up), so a killed run
can be resumed at once. The file itself stays, holding the last holder's pid and host for the
refusal message. Local file systems only: ``flock`` over NFS may not exclude other machines.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

LOCK_FILE = "writer.lock"


class RunLockedError(ValueError):
    """Another process is writing the run; the message names it and the fix."""


class RunLock:
    """``RunLock(run_dir).acquire()`` ... ``release()``; also a context manager."""

    def __init__(self, run_dir: str | os.PathLike[str]):
        self.path = Path(run_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> "RunLock":
        """Take the lock or raise :class:`RunLockedError` (nothing in the run is modified then)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise RunLockedError(f"{self.path.parent} is being written by {holder}: wait for it to finish "
                                 "or stop it, then resume (nothing was touched)") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode("utf-8"), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
