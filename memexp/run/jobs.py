"""What one job of a Hydra launch sets up around `runner.run`: its torch threads, the pointer
from a sweep's job folder to its run folder, and the number it returns to the sweeper."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Mapping, Optional

from memexp.core.schema import ConfigError

# Set by the pre-check before a sweep launches (memexp.cli.app): how many jobs the sweep has, read
# by each job (launcher workers inherit the environment) to share the cores among them.
SWEEP_JOBS_ENV = "MEMEXP_SWEEP_JOBS"


def cores() -> int:
    """CPU cores this process may run on (a SLURM allocation or taskset narrows them)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def parallel_jobs(launcher: Mapping[str, Any], sweep_jobs: Optional[int]) -> int:
    """How many jobs of this launch run at once on this machine: joblib runs n_jobs (-1: one per
    core), submitit's local launcher every job of the sweep; the basic launcher one at a time."""
    target = str(launcher.get("_target_", ""))
    if target.endswith("JoblibLauncher"):
        n = int(launcher.get("n_jobs") or -1)
        parallel = n if n > 0 else cores()
    elif target.endswith("hydra_submitit_launcher.submitit_launcher.LocalLauncher"):
        parallel = sweep_jobs or 1
    else:
        return 1
    return max(1, min(parallel, sweep_jobs) if sweep_jobs else parallel)


def job_threads(threads: Optional[int], launcher: Mapping[str, Any]) -> Optional[int]:
    """Torch CPU threads for one job: `threads` when set; else a SLURM job's own CPUs
    (cpus_per_task); else this machine's cores shared among the jobs that run at once. None (torch's
    default) when jobs run one at a time."""
    if threads:
        return threads
    if os.environ.get("SLURM_CPUS_PER_TASK"):
        return int(os.environ["SLURM_CPUS_PER_TASK"])
    if launcher.get("cpus_per_task"):
        return int(launcher["cpus_per_task"])
    sweep_jobs = int(os.environ[SWEEP_JOBS_ENV]) if os.environ.get(SWEEP_JOBS_ENV) else None
    parallel = parallel_jobs(launcher, sweep_jobs)
    return max(1, cores() // parallel) if parallel > 1 else None


POINTER = "run_folder.txt"  # in a sweep's job folder: the absolute path of the job's run folder
LINK = "run"  # in a sweep's job folder: a symlink to the run folder


def link_run_folder(job_dir: Path, run_folder: Path) -> None:
    """Point a sweep's job folder (multirun/<time>/<n>/) at the run folder holding its records."""
    target = Path(run_folder).resolve()
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / POINTER).write_text(f"{target}\n")
    link = job_dir / LINK
    if link.is_symlink():
        link.unlink()
    if not link.exists():
        try:
            link.symlink_to(target, target_is_directory=True)
        except OSError:  # a filesystem without symlinks: run_folder.txt says the same
            pass


def metric_value(summary: Mapping[str, Any], metric: str) -> float:
    """The summary's `metric` as a float for the sweeper: a key (`overall`, `aggregate/f1`), or a
    path through nested tables (`by_length/4096`, `scores/niah_single_1/1024`). NaN when the run
    scored nothing (Optuna records such a trial as failed)."""
    value: Any = summary.get(metric) if metric in summary else summary
    if metric not in summary:
        for part in metric.split("/"):
            if not isinstance(value, Mapping) or part not in value:
                known = ", ".join(k for k, v in summary.items() if isinstance(v, (int, float, dict)))
                raise ConfigError(f"metric={metric!r}: not in the run's summary; its keys are {known}")
            value = value[part]
    return math.nan if value is None else float(value)
