"""`memexp status <sweep folder>`: where each job of a sweep stands, on any launcher.

One line per job: its number, its state, the questions recorded (and examples recorded out of
the examples its run expects), its scheduler id and log, and the overrides that tell it apart.

States: pending (queued by SLURM), running (SLURM runs it, or its run folder's lock is held),
done, failed (with the job's one line), stopped (neither queued nor running nor finished: an
interrupted local job; resume it with the same command).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path

from memexp.cluster.sweep_folder import SweepJob, recorded, sweep_jobs
from memexp.core.schema import ConfigError
from memexp.run.lock import LOCK_NAME

# SLURM's job states (squeue %T) as the sweep sees them
QUEUED = {"PENDING": "pending", "REQUEUED": "pending", "REQUEUE_HOLD": "pending", "REQUEUE_FED": "pending",
          "CONFIGURING": "pending", "SUSPENDED": "pending", "RESIZING": "running", "RUNNING": "running",
          "COMPLETING": "running", "STAGE_OUT": "running", "SIGNALING": "running"}


def slurm_queue() -> dict[str, str]:
    """job id ("12_3" for an array task) -> state, for every job squeue lists; empty without SLURM."""
    if shutil.which("squeue") is None:
        return {}
    out = subprocess.run(["squeue", "-h", "-r", "-o", "%i %T"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        return {}
    return dict(line.split()[:2] for line in out.stdout.splitlines() if len(line.split()) >= 2)


def lock_held(run_folder: Path | None) -> bool:
    """Is a run writing this folder now (memexp.run.lock's flock is held)?"""
    if run_folder is None or not (run_folder / LOCK_NAME).is_file():
        return False
    fd = os.open(run_folder / LOCK_NAME, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def job_state(job: SweepJob, queue: dict[str, str]) -> str:
    if job.outcome is not None:
        return job.outcome
    if job.job_id is not None and job.job_id in queue:
        return QUEUED.get(queue[job.job_id], "running")
    if lock_held(job.run_folder):
        return "running"
    if job.job_id is not None:  # submitted, out of the queue, and no result: cancelled or killed
        job.error = "ended without a result (cancelled, killed, or its node failed)"
        return "failed"
    return "done" if run_complete(job.run_folder) else "stopped"


def run_complete(run_folder: Path | None) -> bool:
    """The run's summary.json says it is complete (a launcher without submitit leaves no result)."""
    summary = run_folder / "summary.json" if run_folder is not None else None
    try:
        return bool(summary and json.loads(summary.read_text()).get("complete"))
    except (OSError, ValueError):
        return False


def status_lines(sweep: Path, queue: dict[str, str] | None = None) -> list[str]:
    queue = slurm_queue() if queue is None else queue
    lines = []
    for job in sweep_jobs(sweep):
        state = job_state(job, queue)
        questions, examples, expected = recorded(job.run_folder)
        line = (f"#{job.num:<3} {state:<8} {questions:>6} questions  {examples}/{expected if expected is not None else '?'}"
                f" examples  {job.job_id or '-'}  log {job.log or job.folder}  ({job.label})")
        if state == "failed" and job.error:
            line += f"  {job.error}"
        lines.append(line)
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):
        raise ConfigError("status takes one sweep folder (multirun/<time>/), e.g. "
                          "python -m memexp status outputs/multirun/2025-01-31_12-00-00")
    sweep = Path(argv[0])
    if not sweep.is_dir():
        raise ConfigError(f"status: {sweep}: no such folder")
    lines = status_lines(sweep)
    if not lines:
        raise ConfigError(f"status: {sweep}: no jobs there (not a sweep folder, or nothing was submitted)")
    print("\n".join(lines))
    return 0
