"""Which of a method's fields change what `Method.read` computes: its read identity.

A method declares, in its METHODS entry (beside its schema), the fields that do *not* change the
read, so that a new field counts as read-side until its author says otherwise (the safe side: an
undeclared field only costs a shared read, never a wrong one):

- `answer_fields`: fields `answer` alone uses. Two configurations that differ only in them read a
  context into equal memories, so one read serves both (`read_identity`).
- `writer_fields`: fields that change what `read` keeps but not the backbone's computation while
  reading (NoteBank's W, B, window, tail, addresses): configurations that differ only in them (and
  answer fields) share one forward pass, each writing its own memory (`Method.read_shared`;
  `pass_identity`).
- `backbone_fields`: fields among those two that change the loaded backbone at `prepare` (a read
  adapter): a configuration that sets one prepares a backbone of its own (memexp.run.groups).

The method's implementation (the registry target), not its name, is part of the identity: Plain
and its clean start run one class, so they share a read (`clean_start` differs only in `rescale`).
tests/methods/test_read_identity.py proves each declaration on a tiny backbone.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from memexp.core.registry import METHODS


def _meta_fields(name: str, key: str) -> tuple[str, ...]:
    return tuple(METHODS.get(name).meta.get(key, ()))


def answer_fields(name: str) -> tuple[str, ...]:
    """The fields of method `name` that only `answer` reads."""
    return _meta_fields(name, "answer_fields")


def writer_fields(name: str) -> tuple[str, ...]:
    """The fields of method `name` that change the read's memory but not the backbone's pass."""
    return _meta_fields(name, "writer_fields")


def backbone_fields(name: str) -> tuple[str, ...]:
    """The fields of method `name` that change the backbone itself when the method prepares it."""
    return _meta_fields(name, "backbone_fields")


def _implementation(name: str) -> str:
    target = METHODS.get(name).target
    return target if isinstance(target, str) else f"{target.__module__}:{target.__qualname__}"


def _identity(method_cfg: Any, left_out: tuple[str, ...]) -> dict[str, Any]:
    fields = {k: v for k, v in asdict(method_cfg).items() if k != "name" and k not in left_out}
    return {"implementation": _implementation(method_cfg.name), **fields}


def read_identity(method_cfg: Any) -> dict[str, Any]:
    """What `read` depends on: configurations with equal read identities read equal memories."""
    return _identity(method_cfg, answer_fields(method_cfg.name))


def pass_identity(method_cfg: Any) -> dict[str, Any]:
    """What the backbone's pass over a context depends on: configurations with equal pass
    identities can read in one pass (`Method.read_shared`) though their read identities differ."""
    return _identity(method_cfg, answer_fields(method_cfg.name) + writer_fields(method_cfg.name))
