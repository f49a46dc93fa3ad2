"""Benchmarks: `build_benchmark(cfg)` turns a validated bench config into a Benchmark."""

from __future__ import annotations

import importlib

from memexp.benchmarks.base import Benchmark, Example, Question

# bench name -> "module:Class"; each class takes its validated config dataclass.
REGISTRY = {
    "ruler": "memexp.benchmarks.ruler:Ruler",
    "longbench": "memexp.benchmarks.longbench:LongBench",
    "longbench_v2": "memexp.benchmarks.longbench_v2:LongBenchV2",
    "memoryagentbench": "memexp.benchmarks.memoryagentbench:MemoryAgentBench",
    "quality": "memexp.benchmarks.quality:Quality",
    "longhealth": "memexp.benchmarks.longhealth:LongHealth",
}


def build_benchmark(cfg) -> Benchmark:
    module, _, cls = REGISTRY[cfg.name].partition(":")
    return getattr(importlib.import_module(module), cls)(cfg)


__all__ = ["Benchmark", "Example", "Question", "build_benchmark", "REGISTRY"]
