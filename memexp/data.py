"""`python -m memexp data bench=<name>`: download a benchmark once, on a connected machine,
into its `bench.cache_dir`, so later runs (and machines sharing that folder) work offline.

A benchmark takes part by giving its module a `download(cfg) -> Path`; benchmarks made
locally (RULER's synthetic tasks) have nothing to fetch.
"""

from __future__ import annotations

import sys
from pathlib import Path

from memexp.benchmarks.datasets import BenchmarkDataError, is_cached, offline
from memexp.config import BenchConfig
from memexp.registry import BENCHES


def download(bench_cfg: BenchConfig) -> Path:
    """Fetch the benchmark's data unless already cached; returns the cache folder."""
    module = sys.modules[BENCHES.get(bench_cfg.name).load().__module__] if bench_cfg.name in BENCHES else None
    fetch = getattr(module, "download", None)
    if fetch is None:
        raise BenchmarkDataError(f"bench={bench_cfg.name}: nothing to download (its data is made locally)")
    cache_dir = getattr(bench_cfg, "cache_dir", None)
    if offline() and not (cache_dir and is_cached(cache_dir)):
        raise BenchmarkDataError(f"bench={bench_cfg.name}: HF_HUB_OFFLINE / HF_DATASETS_OFFLINE is set; "
                                 f"unset it on a connected machine to download")
    return fetch(bench_cfg)
