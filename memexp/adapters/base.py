"""What every kind of adapter offers (torchtune's adapter protocol, narrowed to what methods use).

An adapter set lives beside the backbone, never inside it: its parameters are not registered
in `backbone.model`, so `model.state_dict()` keeps exactly the checkpoint's tensor names and
the base weights are never written. It changes the computation only inside `enabled()`.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

import torch
from torch import nn


class AdapterError(ValueError):
    """Adapters that do not fit the model (unknown target, bad rows, shape mismatch on load);
    one line naming the module and what differs."""


@runtime_checkable
class Adapters(Protocol):
    """A set of updates attached to named modules of one model."""

    kind: str  # the name `memexp.adapters.io` stores in the spec to rebuild the set on load

    def enabled(self) -> AbstractContextManager[None]:
        """Inside the block the updates apply; outside, the model computes as if they did not exist."""

    @property
    def is_enabled(self) -> bool: ...

    def trainable_parameters(self) -> list[nn.Parameter]:
        """The adapters' own parameters, the only ones training should update."""

    def spec(self) -> dict:
        """A JSON-able description from which the same set can be attached again (targets,
        shapes, hyper-parameters): what `save` writes next to the tensors."""

    def tensors(self) -> dict[str, torch.Tensor]:
        """Every adapter tensor by a stable name (`<module name>.<tensor>`): what `save` writes."""

    def load_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        """Copy saved tensors in; a missing, extra or mis-shaped tensor is an `AdapterError`."""


def model_of(target) -> nn.Module:
    """The nn.Module adapters attach to: a backbone's `model`, or the module itself."""
    model = getattr(target, "model", target)
    if not isinstance(model, nn.Module):
        raise AdapterError(f"adapters attach to a backbone or an nn.Module, got {type(target).__name__}")
    return model


def freeze_base(target) -> None:
    """requires_grad=False on every parameter of the backbone's model (the adapters' own
    parameters live outside it and stay trainable)."""
    model_of(target).requires_grad_(False)
