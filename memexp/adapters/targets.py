"""Which projections an adapter updates: module-name globs, and row slices of fused projections.

Targets are `fnmatch` globs over the names of `nn.Linear` modules in the backbone's `model`
(`dict(backbone.model.named_modules())`), e.g. "model.layers.*.attn.q_proj"; `*` also matches
dots, so "*.q_proj" reaches every layer. Names are the checkpoint's module names, so targets
read like the tensor names in the safetensors file.

Row slices restrict an update to some output rows of a projection. They are written as
"start:stop" (half-open, like Python) or by the name of a part of a fused projection:

    Mamba-2 `mixer.in_proj`        z | x | B | C | dt   (and "xBC" for the conv's three inputs)
    Qwen3.5 `linear_attn.in_proj_qkv`   q | k | v

Each architecture declares its fused layouts on the module that owns the projection
(`fused_rows(attribute)`), so adapters know no architecture by name.
"""

from __future__ import annotations

import difflib
import fnmatch
import re

from torch import nn

from memexp.adapters.base import AdapterError

Rows = tuple[tuple[int, int], ...]  # sorted, disjoint, half-open row ranges


def resolve_targets(model: nn.Module, patterns: list[str]) -> dict[str, nn.Linear]:
    """The nn.Linear modules whose names match any of `patterns`, in the model's module order.
    A pattern that matches no Linear module is an error naming the closest module names."""
    linears = {name: m for name, m in model.named_modules() if isinstance(m, nn.Linear)}
    found: dict[str, nn.Linear] = {}
    for pattern in patterns:
        hits = [name for name in linears if fnmatch.fnmatchcase(name, pattern)]
        if not hits:
            close = difflib.get_close_matches(pattern, list(linears), n=3, cutoff=0.3)
            hint = f"; closest Linear modules: {', '.join(close)}" if close else ""
            raise AdapterError(f"adapters.targets: {pattern!r} matches no nn.Linear module of "
                               f"{type(model).__name__}{hint}")
        found.update((name, linears[name]) for name in hits)
    return {name: found[name] for name in linears if name in found}


def fused_layout(model: nn.Module, module_name: str) -> dict[str, tuple[int, int]]:
    """Named row ranges of a fused projection ({} when the projection is not fused), as the
    module that owns it declares them (`owner.fused_rows(attribute)`, beside the architecture)."""
    owner_name, _, attr = module_name.rpartition(".")
    owner = model.get_submodule(owner_name) if owner_name else model
    parts = owner.fused_rows(attr) if hasattr(owner, "fused_rows") else {}
    out = model.get_submodule(module_name).out_features
    covered = max((stop for _, stop in parts.values()), default=out)
    if covered != out:
        raise AdapterError(f"{module_name}: the fused layout {list(parts)} of {type(owner).__name__} covers "
                           f"{covered} rows but the projection has {out}")
    return parts


def parse_rows(model: nn.Module, module_name: str, spec: list[str]) -> Rows:
    """Row ranges from names of fused parts and/or "start:stop" strings; adjacent ranges merge."""
    out = model.get_submodule(module_name).out_features
    layout = fused_layout(model, module_name)
    ranges = []
    for item in spec:
        m = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", str(item))
        if m:
            ranges.append((int(m.group(1)), int(m.group(2))))
        elif item in layout:
            ranges.append(layout[item])
        else:
            allowed = ", ".join(layout) if layout else "none (not a fused projection)"
            raise AdapterError(f"adapters.rows[{module_name}]: {item!r} is neither 'start:stop' nor a part name; "
                               f"part names are {allowed}")
    return normalise_rows(ranges, out, module_name)


def normalise_rows(ranges, out_features: int, module_name: str) -> Rows:
    """Sorted, merged, checked half-open ranges within [0, out_features)."""
    merged: list[list[int]] = []
    for start, stop in sorted((int(a), int(b)) for a, b in ranges):
        if not 0 <= start < stop <= out_features:
            raise AdapterError(f"adapters.rows[{module_name}]: {start}:{stop} is not a non-empty range "
                               f"within the projection's {out_features} rows")
        if merged and start < merged[-1][1]:
            raise AdapterError(f"adapters.rows[{module_name}]: {start}:{stop} overlaps "
                               f"{merged[-1][0]}:{merged[-1][1]}")
        if merged and start == merged[-1][1]:
            merged[-1][1] = stop
        else:
            merged.append([start, stop])
    if not merged:
        raise AdapterError(f"adapters.rows[{module_name}]: no rows given")
    return tuple((a, b) for a, b in merged)
