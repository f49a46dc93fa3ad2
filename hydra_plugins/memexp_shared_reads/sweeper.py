"""The default sweeper of `python -m memexp run -m` (conf/hydra/sweeper/shared_reads.yaml)."""

from __future__ import annotations

from typing import Any, List

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper


class SharedReadsSweeper(BasicSweeper):
    """Hydra's basic sweeper (the same jobs, from the same overrides), launching each group of jobs
    that can share their reads as one job (memexp.cli.sweeper)."""

    def sweep(self, arguments: List[str]) -> Any:
        from memexp.cli.sweeper import grouped_sweep

        return grouped_sweep(self, arguments)
