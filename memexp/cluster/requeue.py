"""A time-limited SLURM job's requeue, counted when SLURM's own SIGTERM ends the request.

submitit's handler for the time-limit signal runs `scontrol requeue <job>` from inside the job.
To requeue, SLURM ends the job's processes with SIGTERM, and on a loaded node that can reach the
scontrol child before it exits: submitit then raises CalledProcessError (-15) and reports the job,
which SLURM is requeueing, as failed. Seen on memexp's one-node test cluster. The scontrol child
killed by SIGTERM counts as sent here; should SLURM in fact be ending the job at its time limit
instead, the job ends without a result and the sweep reports it as not completed, as before."""

from __future__ import annotations

import signal
import subprocess

_MARK = "_memexp_requeue"


def harden_requeue() -> None:
    """Make submitit's SLURM requeue in this process take scontrol's death by SIGTERM as sent
    (once per process; a no-op without submitit)."""
    try:
        from submitit.slurm.slurm import SlurmJobEnvironment
    except ImportError:
        return
    original = SlurmJobEnvironment._requeue
    if getattr(original, _MARK, False):
        return

    def _requeue(self, countdown: int) -> None:
        try:
            original(self, countdown)
        except subprocess.CalledProcessError as e:
            if e.returncode != -signal.SIGTERM:
                raise

    setattr(_requeue, _MARK, True)
    SlurmJobEnvironment._requeue = _requeue
