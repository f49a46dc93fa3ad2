"""A job of a sweep that fails for a reason the user can fix (memexp.core.errors) inside a launcher's
worker (a SLURM job, a local process) says so in one line in its log, and leaves that line in its
job folder (`failed.json`, with the log's path) instead of ending its process: the sweep goes on
with the other jobs and names every failed job when it ends (memexp.cluster.sweep_report)."""

from __future__ import annotations

import json
import os
from pathlib import Path

MARKER = "failed.json"


def in_launcher_worker() -> bool:
    """True inside a job that submitit runs (SLURM or local processes): its own process, whose
    exit would not tell the sweep which job failed."""
    return bool(os.environ.get("SUBMITIT_FOLDER"))


def worker_log() -> str | None:
    """The stderr log of this submitit job, where its one line went."""
    try:
        import submitit

        return str(submitit.JobEnvironment().paths.stderr)
    except Exception:  # not a submitit job after all: the sweep names the job folder instead
        return None


def record_failure(job_dir: Path, line: str) -> None:
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / MARKER).write_text(json.dumps({"error": line, "log": worker_log()}) + "\n")


def clear_failure(job_dir: Path) -> None:
    """A job that starts again (requeued, or rerun by hand) drops its earlier failure."""
    (job_dir / MARKER).unlink(missing_ok=True)


def read_failure(job_dir: Path) -> dict | None:
    path = job_dir / MARKER
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
