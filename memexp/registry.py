"""One small registry type, used once per axis (architectures, methods, routers, benchmarks).

An entry names its implementation and its schema as lazy `module:attr` strings (or the objects
themselves), so listing and validating never imports a model; `load()` imports on first use.
Capabilities that validation needs live in the entry's `meta`, never in `if name == ...`.

    ARCHS = Registry("backbone.arch")
    ARCHS.register("gdn", "memexp.backbones.gdn.model:build", schema=..., recurrent_channels=True)
    ARCHS.get("gnd")   # RegistryError: backbone.arch='gnd': did you mean gdn? allowed values are ...
"""

from __future__ import annotations

import difflib
import importlib
import sys
from dataclasses import dataclass, field
from typing import Any, Iterator


class RegistryError(ValueError):
    """An unknown or malformed entry; one line naming the field and the allowed values."""


def load_object(target: Any) -> Any:
    """`"pkg.mod:attr"` (attr may be dotted) imported; anything else is returned as it is."""
    if not isinstance(target, str):
        return target
    module, sep, attr = target.partition(":")
    if not sep or not module or not attr:
        raise RegistryError(f"{target!r}: a lazy target is written 'package.module:attribute'")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass
class Entry:
    """One registered name: its implementation, its schema and what validation may ask of it."""

    name: str
    target: Any  # "module:attr" or the object (a class or a builder function)
    schema: Any = None  # "module:Class" or the dataclass that configures it
    meta: dict[str, Any] = field(default_factory=dict)
    origin: str = ""  # the module that registered it

    def load(self) -> Any:
        return load_object(self.target)

    def load_schema(self) -> Any:
        return load_object(self.schema)


class Registry:
    """Names of one kind (`field` is how the user writes the choice, e.g. `method.name`)."""

    def __init__(self, field: str, builtins: tuple[str, ...] = ()) -> None:
        self.field = field
        self._entries: dict[str, Entry] = {}
        # modules that register memexp's own entries when imported; imported on first look-up,
        # so that naming a registry costs nothing and each entry is registered beside its code
        self._builtins = list(builtins)
        self._rank = {module: i for i, module in enumerate(builtins)}
        self._loading = False

    def _load_builtins(self) -> None:
        # a look-up made while a builtin module imports leaves the loading to the outer call, so
        # entries keep the order of `builtins` (the order "allowed values are ..." lists them)
        if self._loading:
            return
        self._loading = True
        try:
            while self._builtins:
                importlib.import_module(self._builtins[0])
                self._builtins.pop(0)
        finally:
            self._loading = False

    def register(self, name: str, target: Any, schema: Any = None, **meta: Any) -> Entry:
        """Add or replace `name`. Outside packages call this once to make a name runnable."""
        if not isinstance(name, str) or not name:
            raise RegistryError(f"{self.field}: a registered name must be a non-empty string, got {name!r}")
        entry = Entry(name, target, schema, dict(meta), origin=sys._getframe(1).f_globals.get("__name__", ""))
        self._entries.pop(name, None)
        self._entries[name] = entry
        # memexp's own entries keep the order of `builtins` however their modules were first
        # imported (a direct import of one registers it early); outside entries follow, in order
        outside = len(self._rank)
        order = sorted(enumerate(self._entries.values()), key=lambda ie: (self._rank.get(ie[1].origin, outside), ie[0]))
        self._entries = {e.name: e for _, e in order}
        return entry

    def unregister(self, name: str) -> Entry:
        """Remove `name` (an outside package undoing its registration, or a test cleaning up)."""
        self._load_builtins()
        if name not in self._entries:
            raise RegistryError(self.unknown_message(name))
        return self._entries.pop(name)

    def get(self, name: Any) -> Entry:
        self._load_builtins()
        if name in self._entries:
            return self._entries[name]
        raise RegistryError(self.unknown_message(name))

    def unknown_message(self, name: Any) -> str:
        self._load_builtins()
        allowed = ", ".join(self._entries)
        close = difflib.get_close_matches(str(name), list(self._entries), n=1) if name is not None else []
        hint = f"did you mean {close[0]}? " if close else ""
        return f"{self.field}={name!r}: {hint}allowed values are {allowed}"

    def names(self) -> list[str]:
        self._load_builtins()
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        self._load_builtins()
        return name in self._entries

    def __iter__(self) -> Iterator[Entry]:
        self._load_builtins()
        return iter(list(self._entries.values()))

    def __len__(self) -> int:
        self._load_builtins()
        return len(self._entries)


# The four axes. Each builtin module registers its entries beside its implementation: the
# architectures from their packages, methods and benchmarks from the light schema modules beside
# their code (no torch, so that validating a config loads no model code).
ARCHS = Registry("backbone.arch", builtins=tuple(f"memexp.backbones.{p}" for p in
                                                 ("gdn", "gdn2", "mamba2", "hybrid", "attention")))
METHODS = Registry("method.name", builtins=("memexp.methods.plain_config", "memexp.methods.jrt_config",
                                            "memexp.methods.notebank.config", "memexp.methods.titan.config",
                                            "memexp.methods.infllm.config"))
ROUTERS = Registry("method.router", builtins=("memexp.methods.notebank.routers",))
BENCHES = Registry("bench.name", builtins=tuple(f"memexp.benchmarks.{m}" for m in (
    "ruler.config", "longbench_config", "longbench_v2_config", "memoryagentbench_config", "quality_config",
    "longhealth_config")))
# Training recipes (`python -m memexp train recipe=<name>`): target = the run function, schema =
# the recipe's dataclass; registered in memexp.training.recipes without importing torch.
RECIPES = Registry("recipe", builtins=("memexp.training.recipes",))
