"""One writer per run folder: an advisory lock held for the whole run.

`fcntl.flock` on `<folder>/run.lock`: the kernel drops the lock when its holder exits, however
it exits (SIGKILL included), so a stale lock file never blocks a resume. The holder writes its
pid, host and start time into the file, so a second process on the same folder names it.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path

LOCK_NAME = "run.lock"


class RunLockedError(RuntimeError):
    """Another process holds the run folder; the message is one line naming it and the fix."""


class RunLock:
    """`with RunLock(folder, wait=False):` holds `folder` or raises RunLockedError at once
    (with `wait=True`, blocks until the holder finishes)."""

    def __init__(self, folder: Path, wait: bool = False) -> None:
        self.path = Path(folder) / LOCK_NAME
        self.wait = wait
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not self.wait:
                holder = self.holder()
                os.close(fd)
                raise RunLockedError(f"run folder {self.path.parent} is in use by {holder}; wait for it to finish, "
                                     f"or pass wait_for_lock=true to wait") from None
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        self._fd = fd

    def holder(self, settle: float = 2.0) -> str:
        """The holder as the lock file states it. A holder writes the file just after it takes the
        lock, so a process that lost a race by microseconds may find it empty: it reads again for up
        to `settle` seconds before naming "another process"."""
        deadline = time.monotonic() + settle
        while True:
            try:
                info = json.loads(self.path.read_text())
                return f"pid {info['pid']} on {info['host']} (started {info['started']})"
            except (OSError, ValueError, KeyError, TypeError):
                if time.monotonic() >= deadline:
                    return "another process"
                time.sleep(0.02)

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
