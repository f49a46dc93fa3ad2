"""The one switch between upstream/own Triton kernels and memexp's PyTorch reference ops.

`kernels=auto` uses kernels for CUDA tensors when the kernel library imports, and the
reference ops everywhere else; `triton` insists on kernels (and fails clearly when they
cannot run); `torch` always uses the reference ops. Every op asks `use_kernels(tensor)`.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import sys
import types
from collections import Counter
from functools import lru_cache

import torch

MODES = ("auto", "triton", "torch")
_mode = os.environ.get("MEMEXP_KERNELS", "auto")
# (library, "kernel" | "torch") -> how many op calls on CUDA tensors took that path: the GPU check's
# report says which path ran, not which one could have
_calls: Counter = Counter()


def set_kernels(mode: str) -> None:
    global _mode
    if mode not in MODES:
        raise ValueError(f"kernels={mode!r}: allowed values are {', '.join(MODES)}")
    _mode = mode


def kernels_mode() -> str:
    return _mode


@lru_cache(maxsize=None)
def has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def interpreting() -> bool:
    """Triton's CPU interpreter is on (tests of memexp's own kernels on this machine)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def use_kernels(x: torch.Tensor, library: str = "triton", required: bool = True) -> bool:
    """Whether the op on tensor `x` should run the kernel from `library` (e.g. 'fla',
    'mamba_ssm', 'triton'). In `triton` mode a missing library or a CPU tensor outside the
    interpreter is an error rather than a silent fallback, unless the kernel is not
    `required` (an optional speed-up such as causal-conv1d, which `triton` mode does not
    insist on)."""
    if _mode == "torch":
        return False
    runnable = has_module(library) and (x.is_cuda or (library == "triton" and interpreting()))
    if _mode == "triton" and required and not runnable:
        where = "CUDA tensors" if not x.is_cuda else f"the '{library}' package"
        raise RuntimeError(f"kernels=triton needs {where}; use kernels=auto or kernels=torch")
    if x.is_cuda:
        _calls[library, "kernel" if runnable else "torch"] += 1
    return runnable


def kernel_calls() -> dict[tuple[str, str], int]:
    """{(library, 'kernel' | 'torch'): op calls on CUDA tensors} since the last `reset_kernel_calls`."""
    return dict(_calls)


def reset_kernel_calls() -> None:
    _calls.clear()


def kernel_module(name: str) -> types.ModuleType:
    """Import module `name` of a kernel library (e.g. 'mamba_ssm.ops.triton.ssd_combined').

    mamba_ssm built without its CUDA extension (MAMBA_SKIP_CUDA_BUILD, the only build possible
    without nvcc) ships its Triton kernels, but its package __init__ imports the extension and
    fails. Then the package is entered without running that __init__, so its Triton modules
    import as they are; `library_status` says so."""
    try:
        return importlib.import_module(name)
    except ImportError:
        top = name.split(".")[0]
        if top in sys.modules or not _enter_without_init(top):
            raise
        return importlib.import_module(name)


def _enter_without_init(package: str) -> bool:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return False
    module = types.ModuleType(package)
    module.__path__ = list(spec.submodule_search_locations)
    module.__spec__ = spec
    module.__package__ = package
    module.__memexp_without_init__ = True
    sys.modules[package] = module
    return True


def library_status(library: str) -> str:
    """One line on a kernel library for reports: its version and how memexp can use it."""
    if not has_module(library):
        return "not installed: memexp's torch path runs in its place"
    try:
        version = importlib.metadata.version(importlib.metadata.packages_distributions().get(library, [library])[0])
    except importlib.metadata.PackageNotFoundError:
        version = "version unknown"
    try:
        importlib.import_module(library)
        return f"{version}"
    except ImportError as e:
        return f"{version}, package import fails ({e}); its Triton modules are imported without its __init__"
