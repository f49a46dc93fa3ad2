"""Ctrl-C at any moment ends a memexp command with exit code 130 and one line, never a traceback.

A KeyboardInterrupt raised at an arbitrary instant can land inside an import (torch, numpy, bm25s
half-initialised), Hydra's composition or its error reporting, and surface as some other error
(ImportError, RecursionError) with a long traceback. So the command line (`memexp.__main__.main`)
installs `exit_now`: the process prints its one line and exits 130 at once, which is safe while
nothing needs finishing, since run folders are written atomically or append-only.

The one stretch that must stop cleanly, a run writing its folder, enters `raising()`: there
Ctrl-C raises KeyboardInterrupt as usual (the runner writes the partial summary and says how to
resume), and `requested()` stays true afterwards, so whatever error the interrupt turned into
still reads as an interrupt (memexp.core.errors).
"""

from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager
from typing import Iterator

_state = {"requested": False, "line": "interrupted"}


def exit_now(signum, frame) -> None:
    os.write(2, f"memexp: {_state['line']}\n".encode())
    os._exit(130)


def install(line: str = "interrupted") -> None:
    """Make Ctrl-C print `memexp: <line>` and exit 130 (the command line only: a library caller
    keeps its own handler)."""
    _state["line"] = line
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, exit_now)


def _raise(signum, frame) -> None:
    _state["requested"] = True
    raise KeyboardInterrupt


@contextmanager
def raising() -> Iterator[None]:
    """Within: Ctrl-C raises KeyboardInterrupt (and is remembered until the next `raising()`, see
    `requested`)."""
    _state["requested"] = False  # an interrupt a caller already handled is not this stretch's
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _raise)
    try:
        yield
    finally:
        # on the command line, once interrupted, a second Ctrl-C must not cut the first one's line short
        signal.signal(signal.SIGINT, signal.SIG_IGN if _state["requested"] and previous is exit_now else previous)


def requested() -> bool:
    """Whether Ctrl-C was pressed inside `raising()` in this process."""
    return _state["requested"]
