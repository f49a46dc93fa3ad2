"""Building a model on the meta device: its shapes without memory or values, for a checkpoint to
fill next (memexp.backbones.loading) or for counting its projections (memexp.backbones.shapes).

Initialisers have nothing to fill there, so they are skipped. That is also start-up time: the meta
implementation of `Tensor.normal_` (what nn.Embedding's initialisation calls) imports torch._dynamo
and sympy, about 1.2 CPU-s in every process that builds a model on the meta device (torch 2.13),
for nothing.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

# what modules' reset_parameters call to fill a tensor in place; each returns the tensor it filled
_FILLS = frozenset({
    torch.Tensor.normal_, torch.Tensor.uniform_, torch.Tensor.fill_, torch.Tensor.zero_,
    nn.init.normal_, nn.init.uniform_, nn.init.trunc_normal_, nn.init.constant_, nn.init.ones_, nn.init.zeros_,
    nn.init.kaiming_uniform_, nn.init.kaiming_normal_, nn.init.xavier_uniform_, nn.init.xavier_normal_,
})


class _SkipFills(TorchFunctionMode):
    """Initialisers on meta tensors return the tensor untouched; a tensor a constructor put on a
    real device on purpose is still filled."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _FILLS:
            tensor = args[0] if args else kwargs["tensor"]
            if tensor.is_meta:
                return tensor
        return func(*args, **kwargs)


@contextlib.contextmanager
def on_meta_device() -> Iterator[None]:
    """Within: tensors and modules are created on the meta device, and initialisers leave them as
    they are."""
    with torch.device("meta"), _SkipFills():
        yield
