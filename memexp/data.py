"""`python -m memexp data bench=<name>`: fetch a benchmark's data once, on a connected machine,
so later runs (and machines sharing the folders) work offline.

A benchmark takes part by giving its module a `download(cfg) -> Path`: hub and web benchmarks
fill their `bench.cache_dir` (from the Hugging Face cache when it already holds the files,
offline too); RULER puts the outside sources its tasks read into the Hugging Face cache.
"""

from __future__ import annotations

import sys
from pathlib import Path

from memexp.benchmarks.datasets import BenchmarkDataError
from memexp.config import BenchConfig
from memexp.registry import BENCHES


def download(bench_cfg: BenchConfig) -> Path:
    """Fetch the benchmark's data unless already cached; returns where it is."""
    module = sys.modules[BENCHES.get(bench_cfg.name).load().__module__] if bench_cfg.name in BENCHES else None
    fetch = getattr(module, "download", None)
    if fetch is None:
        raise BenchmarkDataError(f"bench={bench_cfg.name}: nothing to download (its data is made locally)")
    return fetch(bench_cfg)
