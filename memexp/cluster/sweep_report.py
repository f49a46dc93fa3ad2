"""A Hydra callback (conf/config.yaml, hydra.callbacks) that ends a sweep whose jobs failed with
one line naming each failed job and its log, exit 1; and remembers the sweep folder a multirun
writes, for the one line of a submission the scheduler refuses (memexp.cluster.submission)."""

from __future__ import annotations

import sys
from pathlib import Path

from hydra.experimental.callback import Callback

from memexp.cluster.sweep_folder import sweep_jobs

# the sweep folder of the multirun under way in this process (set when it starts)
current_sweep: list[Path] = []


class SweepReport(Callback):
    def on_multirun_start(self, config, **kwargs) -> None:
        current_sweep[:] = [Path(str(config.hydra.sweep.dir))]

    def on_multirun_end(self, config, **kwargs) -> None:
        sweep = Path(str(config.hydra.sweep.dir))
        line = failed_jobs_line(sweep)
        if line:
            print(f"memexp: {line}", file=sys.stderr)
            raise SystemExit(1)


def failed_jobs_line(sweep: Path) -> str | None:
    """"2 of 4 jobs failed: #1 (method=x ...) <why>, log <path>; ...", or None when none failed."""
    jobs = sweep_jobs(sweep)
    failed = [j for j in jobs if j.outcome == "failed"]
    if not failed:
        return None
    parts = [f"#{j.num} ({j.label}) {j.error}, log {j.log or j.folder}" for j in failed]
    return (f"{len(failed)} of {len(jobs)} jobs failed: {'; '.join(parts)}; `python -m memexp status {sweep}` "
            f"shows every job")
