"""One line for a sweep the scheduler refuses to take: sbatch's own message and the launcher field
that sets what it refused (submitit raises it with sbatch's stderr, from the CalledProcessError)."""

from __future__ import annotations

import subprocess

# sbatch's message (lower case) -> the launcher field to check; the first match wins
FIELDS = (
    ("invalid partition", "hydra.launcher.partition"),
    ("invalid account", "hydra.launcher.account"),
    ("invalid qos", "hydra.launcher.qos"),
    ("invalid feature", "hydra.launcher.constraint"),
    ("generic resource", "hydra.launcher.gpus_per_node (or gres)"),
    ("gres", "hydra.launcher.gpus_per_node (or gres)"),
    ("time limit", "hydra.launcher.timeout_min"),
    ("memory", "hydra.launcher.mem_gb"),
    ("cpu count", "hydra.launcher.cpus_per_task"),
    ("node count", "hydra.launcher.nodes"),
    ("configuration source", "hydra/launcher (this machine is not a SLURM login node)"),
    ("unable to contact slurm controller", "hydra/launcher (no SLURM controller answers from here)"),
    ("unrecognized option", "hydra.launcher.additional_parameters"),
)


def refused_submission(error: BaseException) -> subprocess.CalledProcessError | None:
    """sbatch's failure behind `error` (submitit's FailedJobError), or None for any other error."""
    cause = error.__cause__
    if isinstance(cause, subprocess.CalledProcessError):
        command = cause.cmd if isinstance(cause.cmd, (list, tuple)) else [str(cause.cmd)]
        if command and str(command[0]).endswith("sbatch"):
            return cause
    return None


def submission_line(failure: subprocess.CalledProcessError) -> str:
    lines = [line.strip().removeprefix("sbatch:").strip() for line in str(failure.stderr or "").splitlines()]
    message = "; ".join(line for line in lines if line) or f"exited with {failure.returncode}"
    message = f"sbatch: {message}"
    lower = message.lower()
    field = next((f for key, f in FIELDS if key in lower), "the hydra.launcher fields (conf/hydra/launcher/slurm.yaml)")
    return f"the sweep was not submitted: {message}; check {field}"


def remove_unsubmitted_sweep() -> None:
    """The sweep folder of a multirun whose submission failed holds nothing a job wrote (Hydra's
    multirun.yaml, submitit's unsubmitted pickles): remove it, unless a job folder is there."""
    import shutil

    from memexp.cluster.sweep_report import current_sweep

    for sweep in current_sweep:
        if sweep.is_dir() and not any(p.name.isdigit() for p in sweep.iterdir()):
            shutil.rmtree(sweep)


class WithoutSbatchEcho:
    """sys.stderr while a sweep is submitted: submitit prints a refused sbatch's stderr itself
    before raising it, and `submission_line` says the same in its one line; every other write
    passes through."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self._dropped = False

    def write(self, text: str) -> int:
        lines = [line for line in text.splitlines() if line.strip()]
        if lines and all(line.startswith("sbatch: ") for line in lines):
            self._dropped = True
            return len(text)
        if self._dropped and text == "\n":  # the end of the line print() wrote after the dropped text
            self._dropped = False
            return len(text)
        self._dropped = False
        return self.stream.write(text)

    def __getattr__(self, name: str):
        return getattr(self.stream, name)
