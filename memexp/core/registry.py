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
import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
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

    def __init__(self, field: str, package: str | tuple[str, ...] | None = None, module: str = "__init__") -> None:
        self.field = field
        self._entries: dict[str, Entry] = {}
        # memexp's own entries register in `<package>.<sub>.<module>` for every subpackage that has
        # that module (a new method is a new folder: nothing else lists it). They are discovered and
        # imported on the first look-up, so naming a registry costs nothing.
        # `package`: one package or several, searched in the order given.
        self._packages = (package,) if isinstance(package, str) else tuple(package or ())
        self._module = module
        self._builtins: list[str] | None = None
        self._rank: dict[str, int] = {}
        self._loading = False

    def _discover(self) -> list[str]:
        return [module for package in self._packages for module in self._discover_in(package)]

    def _discover_in(self, package: str) -> list[str]:
        spec = importlib.util.find_spec(package)
        found = []
        for folder in spec.submodule_search_locations or ():
            if self._module != "__init__" and (Path(folder) / f"{self._module}.py").is_file():
                found.append(f"{package}.{self._module}")
            for sub in sorted(Path(folder).iterdir()):
                if (sub / f"{self._module}.py").is_file() and (sub / "__init__.py").is_file():
                    found.append(f"{package}.{sub.name}" + ("" if self._module == "__init__" else f".{self._module}"))
        return sorted(found)

    def _load_builtins(self) -> None:
        # a look-up made while a builtin module imports leaves the loading to the outer call
        if self._loading:
            return
        self._loading = True
        try:
            if self._builtins is None:
                self._builtins = self._discover()
                self._rank = {module: i for i, module in enumerate(self._builtins)}
            while self._builtins:
                importlib.import_module(self._builtins[0])
                self._builtins.pop(0)
            self._order()
        finally:
            self._loading = False

    def register(self, name: str, target: Any, schema: Any = None, **meta: Any) -> Entry:
        """Add or replace `name`. Outside packages call this once to make a name runnable."""
        if not isinstance(name, str) or not name:
            raise RegistryError(f"{self.field}: a registered name must be a non-empty string, got {name!r}")
        entry = Entry(name, target, schema, dict(meta), origin=sys._getframe(1).f_globals.get("__name__", ""))
        self._entries.pop(name, None)
        self._entries[name] = entry
        self._order()
        return entry

    def _order(self) -> None:
        # memexp's own entries first, by package (in the order given) and name, however their modules
        # were first imported (a direct import of one registers it early); then outside entries in the
        # order they were registered
        builtin = sorted((e for e in self._entries.values() if e.origin in self._rank),
                         key=lambda e: (self._package_index(e.origin), e.name))
        outside = [e for e in self._entries.values() if e.origin not in self._rank]
        self._entries = {e.name: e for e in builtin + outside}

    def _package_index(self, module: str) -> int:
        return next(i for i, package in enumerate(self._packages) if module.startswith(package + "."))

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


# The axes. Each builtin registers its entries beside its implementation, in a folder of its own:
# an architecture in its package's __init__ (every subpackage of memexp.backbones), a method or a
# benchmark in the light schema module beside its code (config.py: no torch, so that validating a
# config loads no model code).
ARCHS = Registry("backbone.arch", package="memexp.backbones", module="__init__")
METHODS = Registry("method.name", package="memexp.methods", module="config")
ROUTERS = Registry("method.router", package="memexp.methods", module="routers")
BENCHES = Registry("bench.name", package="memexp.benchmarks", module="config")
# Training recipes (`python -m memexp train recipe=<name>`): target = the run function, schema =
# the recipe's dataclass; each registered without importing torch in a recipes.py beside it: the
# paper recipes' (memexp/training/<recipe>/recipes.py) first, then the embedded models' research
# (memexp/embedded/recipes.py).
RECIPES = Registry("recipe", package=("memexp.training", "memexp.embedded"), module="recipes")
