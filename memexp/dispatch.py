"""The one switch between upstream/own Triton kernels and memexp's PyTorch reference ops.

`kernels=auto` uses kernels for CUDA tensors when the kernel library imports, and the
reference ops everywhere else; `triton` insists on kernels (and fails clearly when they
cannot run); `torch` always uses the reference ops. Every op asks `use_kernels(tensor)`.
"""

from __future__ import annotations

import importlib.util
import os
from functools import lru_cache

import torch

MODES = ("auto", "triton", "torch")
_mode = os.environ.get("MEMEXP_KERNELS", "auto")


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
    return runnable
