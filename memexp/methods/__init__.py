"""Memory methods: `build_method(cfg)` turns a validated method config into a Method.

Methods are named in `memexp.core.registry.METHODS` (schema + lazy target, registered beside each
implementation); this package's names load lazily, so importing a method's schema module
(validation) imports no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memexp.core.registry import METHODS

if TYPE_CHECKING:
    from memexp.methods.base import Method


def build_method(cfg) -> "Method":
    """The Method registered as `cfg.name`, built from its validated config."""
    return METHODS.get(cfg.name).load()(cfg)


def register(name: str, target: Any, schema: Any = None, **meta: Any) -> None:
    """Make `method=<name>` runnable: `target` is a Method class (or "module:Class") taking its config,
    `schema` its config dataclass; `requires=("recurrent_channels",)` names what it needs of a backbone."""
    METHODS.register(name, target, schema, **meta)


__all__ = ["build_method", "register"]
