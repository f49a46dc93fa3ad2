"""Row labels and titles built from what actually differs between the runs shown.

A label is "<backbone> / <method>" plus every config field that takes more than one value:
a group's field (backbone.*, method.*, bench.*) counts when it differs between runs of the
same backbone / method / bench name (Plain has no `rescale`; that is not a difference), a
top-level field when it differs at all. Method fields are written bare (`rescale=0.0`), the
others with their group (`bench.lengths=[1024]`). Fields that only change how a run is
watched or where it is written, and bench.shard (shards are merged), never appear.
Labels that are still equal get the run folder's name appended.
"""

from __future__ import annotations

import hashlib
import json
from typing import Callable, Iterable

from memexp.core.schema import portable_assets

GROUPS = ("backbone", "method", "bench")
# how a run is watched, scheduled or stored; not what it computes (`paths` differ between a
# multirun's jobs and a single run of the same config: "/abs/root" vs ".")
NOT_COMPARED = ("output_dir", "logger", "progress", "threads", "kernels", "paths")
MERGED = ("bench.shard",)


def flat(config: dict) -> dict[str, str]:
    """{"method.rescale": "0.0", "max_examples": "null", ...}: values as JSON, keys dotted once."""
    out = {}
    for key, value in config.items():
        if key in NOT_COMPARED or key == "hydra":
            continue
        if key in GROUPS and isinstance(value, dict):
            out.update({f"{key}.{k}": _json(v) for k, v in value.items()})
        else:
            out[key] = _json(value)
    return {k: v for k, v in out.items() if k not in MERGED}


def _json(value) -> str:
    # json keeps separators such as "\n\n" on one line (Markdown rows, plot legends)
    # an asset's path reads the same whichever machine's run it is (memexp's assets folder moves with the install)
    return json.dumps(portable_assets(value), sort_keys=True, default=str)


def config_key(config: dict) -> str:
    """Equal for configs that compute the same thing (shards of one run share it)."""
    return hashlib.sha256(_json(flat(config)).encode()).hexdigest()[:16]


def _name(config: dict, group: str) -> str:
    return str((config.get(group) or {}).get("name", "?"))


def varying_fields(configs: list[dict], drop: Iterable[str] = ()) -> list[str]:
    flats = [flat(c) for c in configs]
    keys = sorted({k for f in flats for k in f} - set(drop) - {f"{g}.name" for g in GROUPS})
    out = []
    for key in keys:
        group = key.split(".", 1)[0] if "." in key else None
        peers: dict[str, set[str]] = {}
        for cfg, f in zip(configs, flats):
            peer = _name(cfg, group) if group in GROUPS else ""
            if group in GROUPS and key not in f:
                continue  # the field does not exist for this method / backbone / bench
            peers.setdefault(peer, set()).add(f.get(key, "<unset>"))
        if any(len(values) > 1 for values in peers.values()):
            out.append(key)
    return out


def _short(key: str) -> str:
    return key.split(".", 1)[1] if key.startswith("method.") else key


def base_label(config: dict) -> str:
    return f"{_name(config, 'backbone')} / {_name(config, 'method')}"


def labels(configs: list[dict], names: list[str] | None = None, drop: Iterable[str] = (),
           base: Callable[[dict], str] = base_label) -> list[str]:
    """One distinct label per config. `names` (run folder names) disambiguate equal labels;
    `drop`: fields the caller shows otherwise (a heatmap's axes)."""
    varying = varying_fields(configs, drop)
    out = []
    for cfg in configs:
        f = flat(cfg)
        extra = ", ".join(f"{_short(k)}={f[k]}" for k in varying if k in f)
        out.append(base(cfg) + (f" ({extra})" if extra else ""))
    return disambiguate(out, names)


def disambiguate(items: list[str], names: list[str] | None = None) -> list[str]:
    """Equal labels get their run folder's name, or " #1", " #2" ... where those are equal too."""
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(items):
        groups.setdefault(s, []).append(i)
    out = list(items)
    for s, idx in groups.items():
        if len(idx) < 2:
            continue
        tags = [names[i] for i in idx] if names else []
        if len(set(tags)) < len(idx):
            tags = [f"#{k + 1}" for k in range(len(idx))]
        for i, tag in zip(idx, tags):
            out[i] = f"{s} [{tag}]" if not tag.startswith("#") else f"{s} {tag}"
    return out


def n_text(ns: Iterable[int | None]) -> str:
    """'n = 50' or 'n = 3-50' questions per point; '?' when a summary has no counts."""
    known = [n for n in ns if n is not None]
    if not known:
        return "n = ?"
    lo, hi = min(known), max(known)
    return f"n = {lo}" if lo == hi else f"n = {lo}-{hi}"


def title(bench: str, configs: list[dict], ns: Iterable[int | None], what: str = "") -> str:
    """'<bench> · <backbones> · n = ... [· what]'."""
    backbones = ", ".join(sorted({_name(c, "backbone") for c in configs}))
    return " · ".join(p for p in (bench, backbones, n_text(ns) + " per cell", what) if p)
