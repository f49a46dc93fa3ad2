"""Benchmarks: `build_benchmark(cfg)` turns a validated bench config into a Benchmark.

Benchmarks are named in `memexp.core.registry.BENCHES` (schema + lazy target, registered beside each
implementation); this package's names load lazily, so importing a benchmark's schema module
(validation) imports no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memexp.core.registry import BENCHES

if TYPE_CHECKING:
    from memexp.benchmarks.base import Benchmark


def build_benchmark(cfg) -> "Benchmark":
    """The Benchmark registered as `cfg.name`, built from its validated config (its relative
    cache_dir placed under memexp's root, memexp.core.paths)."""
    from memexp.core.paths import rebase_cache

    return BENCHES.get(cfg.name).load()(rebase_cache(cfg))


def register(name: str, target: Any, schema: Any = None, **meta: Any) -> None:
    """Make `bench=<name>` runnable: `target` is a Benchmark class (or "module:Class") taking its
    config, `schema` its config dataclass. A module-level `download(cfg)` beside the class serves
    `python -m memexp data`."""
    BENCHES.register(name, target, schema, **meta)


__all__ = ["build_benchmark", "register"]
