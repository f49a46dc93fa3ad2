"""Helpers of the backbone contract suite (test_contract.py), written without the backbones' own
state code: a walk over every tensor and counter a `State` holds, and per-architecture
recomputations of the keys and queries a recurrent layer hands its observer, from tensors
captured with forward hooks on the layer's own projections.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

Path = tuple  # where a leaf sits inside a state: attribute names and list indices


def is_kv_cache(obj) -> bool:
    """A KV cache keeps keys/values [B, capacity, H, D] in a buffer that grows by doubling, with
    `length` rows written: only those rows are state (the rest is unwritten capacity)."""
    return isinstance(getattr(obj, "length", None), int) and isinstance(getattr(obj, "k", None), torch.Tensor)


def leaves(obj, path: Path = ()) -> list[tuple[Path, object]]:
    """Every tensor and scalar (position, lengths, windows) reachable from `obj`, with its path:
    dataclass / object attributes, list and dict entries, KV caches cut to their written rows."""
    if isinstance(obj, torch.Tensor) or obj is None or isinstance(obj, (bool, int, float, str)):
        return [(path, obj)]
    if isinstance(obj, (list, tuple)):
        return [leaf for i, e in enumerate(obj) for leaf in leaves(e, path + (i,))]
    if isinstance(obj, dict):
        return [leaf for k in sorted(obj) for leaf in leaves(obj[k], path + (k,))]
    if is_kv_cache(obj):
        rest = {k: v for k, v in vars(obj).items() if k not in ("k", "v")}
        return [(path + ("k",), obj.k[:, :obj.length]), (path + ("v",), obj.v[:, :obj.length])] + leaves(rest, path)
    if hasattr(obj, "__dict__"):
        return leaves(dict(vars(obj)), path)
    raise TypeError(f"state{format_path(path)}: cannot walk a {type(obj).__name__}")


def format_path(path: Path) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def tensors(state) -> list[tuple[Path, torch.Tensor]]:
    return [(p, v) for p, v in leaves(state) if isinstance(v, torch.Tensor)]


def walked_nbytes(state) -> int:
    return sum(t.numel() * t.element_size() for _, t in tensors(state))


def snapshot(state) -> dict:
    """Path -> a copy of every leaf, to compare a state with itself later."""
    return {p: v.clone() if isinstance(v, torch.Tensor) else v for p, v in leaves(state)}


def assert_same(state, expected: dict, atol: float = 0.0, what: str = "state") -> None:
    """`state`'s leaves equal `expected` (a snapshot): same paths, scalars, shapes, dtypes, and
    values within `atol` (exactly with atol=0)."""
    got = snapshot(state)
    assert got.keys() == expected.keys(), f"{what}: leaves differ: {sorted(map(format_path, got.keys() ^ expected))}"
    for p, want in expected.items():
        have, where = got[p], f"{what}{format_path(p)}"
        if not isinstance(want, torch.Tensor):
            assert have == want, f"{where}: {have!r} != {want!r}"
            continue
        assert have.shape == want.shape and have.dtype == want.dtype, f"{where}: {have.shape} {have.dtype} != " \
                                                                      f"{want.shape} {want.dtype}"
        if atol == 0.0:
            assert torch.equal(have, want), f"{where}: changed"
        else:
            torch.testing.assert_close(have, want, atol=atol, rtol=atol, msg=lambda m, where=where: f"{where}: {m}")


def memory_tensors(state, names: tuple[str, ...]) -> list[tuple[Path, torch.Tensor]]:
    """The tensors of `state` whose path passes through an attribute named in `names`."""
    return [(p, t) for p, t in tensors(state) if any(part in names for part in p)]


# ---- keys and queries recomputed from hooked projections ---------------------------------------

def causal_conv_silu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """silu(depthwise causal conv) over a whole sequence from zero padding: x [T, D], weight
    [D, 1, W] or [D, W] -> [T, D]. The layers carry a window across chunks; this never does."""
    D = x.shape[-1]
    w = weight.reshape(D, 1, -1)
    y = F.conv1d(F.pad(x.T[None], (w.shape[-1] - 1, 0)), w, bias, groups=D)
    return F.silu(y[0].T)


def l2_eps_inside(x: torch.Tensor, heads: int) -> torch.Tensor:
    """[T, heads * d] -> [T, heads, d] divided by sqrt(|x|^2 + 1e-6) (FLA's in-kernel L2 norm)."""
    x = x.reshape(x.shape[0], heads, -1)
    return x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + 1e-6)


def unit(x: torch.Tensor, heads: int) -> torch.Tensor:
    """[T, heads * d] -> [T, heads, d] divided by max(|x|, 1e-12) (F.normalize)."""
    x = x.reshape(x.shape[0], heads, -1)
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)


@dataclass(frozen=True)
class Features:
    """Where a recurrent layer lives (`layer`, formatted with its index), the projections whose
    outputs are hooked, and how its (keys, queries) [T, H, d_k] follow from them."""

    layer: str
    hooked: tuple[str, ...]
    recompute: Callable  # (layer module, config, {hooked name: [T, D] output}) -> (keys, queries)


def _gdn(m, c, out):
    q = causal_conv_silu(out["q_proj"], m.q_conv1d.weight)
    k = causal_conv_silu(out["k_proj"], m.k_conv1d.weight)
    return l2_eps_inside(k, c.num_heads), l2_eps_inside(q, c.num_heads)


def _qwen35(m, c, out):
    qkv = causal_conv_silu(out["in_proj_qkv"], m.conv1d.weight, m.conv1d.bias)
    q, k = qkv[:, :c.key_dim], qkv[:, c.key_dim:2 * c.key_dim]
    return l2_eps_inside(k, c.linear_num_key_heads), l2_eps_inside(q, c.linear_num_key_heads)


def _mamba2(m, c, out):
    # in_proj rows: z [d_inner] | xBC [d_inner + 2 G N] | dt [H]; xBC is x | B | C
    xbc = causal_conv_silu(out["in_proj"][:, c.d_inner:c.d_inner + c.conv_dim], m.conv1d.weight, m.conv1d.bias)
    gn = c.n_groups * c.state_size
    B, C = xbc[:, c.d_inner:c.d_inner + gn], xbc[:, c.d_inner + gn:]
    return unit(B, c.n_groups), unit(C, c.n_groups)


GDN = Features("model.layers.{}.attn", ("q_proj", "k_proj"), _gdn)
GDN2 = Features("transformer.h.{}.attn", ("q_proj", "k_proj"), _gdn)
QWEN35 = Features("model.layers.{}.linear_attn", ("in_proj_qkv",), _qwen35)
MAMBA2 = Features("backbone.layers.{}.mixer", ("in_proj",), _mamba2)


@contextmanager
def recorded_features(backbone, features: Features, layers: list[int]):
    """Hooks the projections of `layers` while the block runs; yields `reference(layer)` ->
    (keys, queries) over every token those layers read meanwhile, recomputed by `features`."""
    seen: dict[tuple[int, str], list[torch.Tensor]] = {}
    handles = []
    for i in layers:
        layer = backbone.model.get_submodule(features.layer.format(i))
        for name in features.hooked:
            def hook(module, args, output, key=(i, name)):
                seen.setdefault(key, []).append(output.detach()[0].clone())
            handles.append(layer.get_submodule(name).register_forward_hook(hook))

    def reference(i: int) -> tuple[torch.Tensor, torch.Tensor]:
        layer = backbone.model.get_submodule(features.layer.format(i))
        with torch.no_grad():
            return features.recompute(layer, backbone.config, {n: torch.cat(seen[i, n]) for n in features.hooked})

    try:
        yield reference
    finally:
        for h in handles:
            h.remove()
