"""How a command ends when something the user can fix goes wrong: one line, the cause and the fix.

`exit_code(error, command)` prints that line for the failures a user causes and returns the exit
code; anything else is a bug in memexp and is re-raised with its traceback.
- 2: a configuration error (a bad value, caught before any model loads);
- 1: a runtime failure (missing data, a locked or corrupt run folder, a full or read-only disk);
- 130: Ctrl-C, with what was recorded and the command that resumes.
Exceptions are matched by class name, so this module imports no model or benchmark code.
"""

from __future__ import annotations

import errno
import shlex
import sys
from pathlib import Path

from memexp.core import interrupts

CONFIG_ERRORS = ("ConfigError", "RegistryError")
RUNTIME_ERRORS = ("BackboneLoadError", "BenchmarkDataError", "MissingData", "RunLockedError",
                  "RecordsCorruptError", "StrictDataError")
# errors of writing somewhere the user chose (output_dir, bench.cache_dir), not of memexp's code
DISK_ERRNOS = {errno.ENOSPC: "free disk space, or set output_dir to a folder on another disk",
               errno.EDQUOT: "free space within your quota, or set output_dir to another disk",
               errno.EROFS: "set output_dir (or bench.cache_dir) to a writable folder",
               errno.EACCES: "set output_dir (or bench.cache_dir) to a folder you can write",
               errno.EPERM: "set output_dir (or bench.cache_dir) to a folder you can write"}


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run, after the run folder was opened: still an interrupt to whoever called
    the run (a sweep stops, a caller's `except KeyboardInterrupt` holds), with what was recorded."""

    def __init__(self, folder: Path, recorded: int) -> None:
        super().__init__(f"interrupted with {recorded} questions recorded in {folder}")
        self.folder, self.recorded = folder, recorded


def _names(error: BaseException) -> set[str]:
    return {k.__name__ for k in type(error).__mro__}


def classify(error: BaseException, command: str, subcommand: str = "run") -> tuple[int, str] | None:
    """(exit code, one line) for a failure the user can fix; None for a bug. `command`: the
    command line that resumes; `subcommand`: the memexp command that failed."""
    names = _names(error)
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if names & set(CONFIG_ERRORS):
        return 2, first
    if names & set(RUNTIME_ERRORS):
        return 1, first
    if isinstance(error, RunInterrupted):
        return 130, f"{error}; resume with: {command}"
    if isinstance(error, KeyboardInterrupt) or interrupts.requested():  # whatever error Ctrl-C turned into
        return 130, "interrupted before any question was recorded" if subcommand == "run" else "interrupted"
    if isinstance(error, OSError) and error.errno in DISK_ERRNOS:
        where = f" {error.filename}" if error.filename else ""
        return 1, f"cannot write{where}: {error.strerror}; {DISK_ERRNOS[error.errno]}"
    return None


def exit_code(error: BaseException, command: str = "", subcommand: str = "run") -> int:
    """Print the one line for `error` and return its exit code, or re-raise a bug."""
    found = classify(error, command, subcommand)
    if found is None:
        raise error
    code, line = found
    print(f"memexp: {line}", file=sys.stderr)
    return code


def command_line(subcommand: str, argv: list[str]) -> str:
    """The command a user reruns to resume."""
    return shlex.join(["python", "-m", "memexp", subcommand, *argv])


def override_type_message(key: str, message: str, overrides: list[str]) -> str:
    """One line for a value its schema's type rejects while composing; a scalar given for a list
    field (`bench.lengths=4096`) is told the bracket form."""
    if "is not a ListConfig" in message:
        # the last override of the key is the one that took effect
        given = next((o.split("=", 1)[1] for o in reversed(overrides) if o.lstrip("+~").split("=", 1)[0] == key),
                     None)
        example = f"[{given}]" if given is not None else "[a,b]"
        return f"{key}={given}: expected a list; write {key}={example} (with brackets)"
    return f"{key}: {message}"
