"""The one root memexp writes under: runs, sweeps and benchmark caches.

`paths.root` (conf/paths/default.yaml) defaults to $MEMEXP_ROOT, else the folder memexp was
started in. Run and sweep folders are interpolated from it in the YAML; a benchmark's
`cache_dir` stays relative in its config, because the config is hashed into the run folder's
name and a machine's own location must not change that name, and is placed under the root
when the benchmark is built (`rebase_cache`).
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

ENV = "MEMEXP_ROOT"


def _package_folder(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    return Path(next(iter(spec.submodule_search_locations)))


# memexp's configs: the repository's top-level conf/, installed as the package memexp.conf (a
# checkout's editable install and a wheel alike map it there), found by module wherever memexp runs
CONF_DIR = _package_folder("memexp.conf")


def root() -> Path:
    """The root of this process: the last `use_root`, else $MEMEXP_ROOT, else the current folder."""
    return Path(os.environ.get(ENV) or ".").expanduser().resolve()


def use_root(path: str) -> None:
    """Make `path` the root of this process and of every process it starts (launcher workers,
    downloads): they read it from $MEMEXP_ROOT."""
    os.environ[ENV] = str(Path(path).expanduser().resolve())


def under_root(path: str) -> Path:
    """`path` itself when absolute (or ~), else `path` under the root."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else root() / p


def rebase_cache(bench_cfg: Any) -> Any:
    """A copy of a benchmark config whose relative `cache_dir` is placed under the root."""
    cache_dir = getattr(bench_cfg, "cache_dir", None)
    if not cache_dir or Path(cache_dir).expanduser().is_absolute():
        return bench_cfg
    return replace(bench_cfg, cache_dir=str(under_root(cache_dir)))
