"""`python -m memexp data bench=<name>`: fetch a benchmark's data once, on a connected machine,
so later runs (and machines sharing the folders) work offline.

A benchmark takes part by giving its module a `download(cfg) -> Path`: hub and web benchmarks
fill their `bench.cache_dir` (from the Hugging Face cache when it already holds the files,
offline too); RULER puts the outside sources its tasks read into the Hugging Face cache.
`python -m memexp data recipe=notebank_lora` fetches a training recipe's data the same way.
"""

from __future__ import annotations

import sys
from pathlib import Path

from memexp.benchmarks.datasets import BenchmarkDataError
from memexp.core.registry import BENCHES
from memexp.core.schema import BenchConfig


def download(bench_cfg: BenchConfig) -> Path:
    """Fetch the benchmark's data unless already cached; returns where it is."""
    module = sys.modules[BENCHES.get(bench_cfg.name).load().__module__] if bench_cfg.name in BENCHES else None
    fetch = getattr(module, "download", None)
    if fetch is None:
        raise BenchmarkDataError(f"bench={bench_cfg.name}: nothing to download (its data is made locally)")
    return fetch(bench_cfg)


def download_recipe(argv: list[str]) -> Path:
    """`recipe=<name> [recipe fields]`: the recipe's hub data in the Hugging Face cache, where the
    recipe reads it offline (`recipe.data_path=null`); returns where it is."""
    from memexp.cli.train import load_recipe
    from memexp.core.schema import ConfigError
    from memexp.training.notebank_lora.recipe import NoteBankLoRARecipe

    recipe, _ = load_recipe(argv)
    if not isinstance(recipe, NoteBankLoRARecipe) or recipe.data.source != "nq":
        raise ConfigError("recipe: nothing to download (its data is made locally)")
    from memexp.training.notebank_lora.data import hub_files

    return hub_files(recipe.data, download=True)
