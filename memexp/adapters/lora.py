"""LoRA (Hu et al. 2021, as torchtune's LoRALinear) on named projections of a backbone.

    lora = attach_lora(backbone, LoRAConfig(targets=["backbone.layers.*.mixer.in_proj"],
                                            rows={"*.in_proj": ["xBC"]}, rank=8, alpha=16))
    freeze_base(backbone)
    with lora.enabled():
        logits = backbone.forward(state, ids)     # y = W x + (x A^T) B^T * alpha / rank on the chosen rows

The update of each target runs as a forward hook that exists only inside `enabled()`: outside
it the model's modules carry no hook at all, so the bare model's numbers are untouched
bit for bit and the only cost of switching is registering and removing one hook per target.
The adapter tensors live in this object, never in the model, so the checkpoint's
`state_dict()` keys and weights stay as they are. They are fp32 master copies whatever the
backbone computes in (the update itself runs in the compute dtype), so that training a bf16
backbone's adapters keeps steps smaller than bf16's resolution.
"""

from __future__ import annotations

import fnmatch
import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

import torch
from torch import nn

from memexp.adapters.base import AdapterError, model_of
from memexp.adapters.targets import Rows, normalise_rows, parse_rows, resolve_targets
from memexp.core.schema import ConfigError


@dataclass
class LoRAConfig:
    """Which projections get a low-rank update, and its hyper-parameters."""

    targets: list[str] = field(default_factory=list)  # fnmatch globs over nn.Linear module names of backbone.model
    rank: int = 8
    alpha: float = 16.0  # the update is scaled by alpha / rank
    dropout: float = 0.0  # on the update's input only (torchtune's lora_dropout); active in train() mode
    # glob over target names -> the rows its update writes: fused part names ("xBC", "q") or "start:stop";
    # a target no glob matches is updated on all its rows
    rows: dict[str, list[str]] = field(default_factory=dict)
    seed: int = 0  # A's initialisation, drawn target by target in module order

    def check(self, where: str = "adapters") -> None:
        """One-line ConfigError naming the first wrong field."""
        if not self.targets or not all(isinstance(t, str) and t for t in self.targets):
            raise ConfigError(f"{where}.targets={self.targets!r}: give a non-empty list of module-name globs, "
                              f"e.g. ['model.layers.*.attn.q_proj']")
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or self.rank < 1:
            raise ConfigError(f"{where}.rank={self.rank!r}: must be a positive integer")
        if not isinstance(self.alpha, (int, float)) or not math.isfinite(self.alpha) or self.alpha <= 0:
            raise ConfigError(f"{where}.alpha={self.alpha!r}: must be a positive number")
        if not isinstance(self.dropout, (int, float)) or not 0 <= self.dropout < 1:
            raise ConfigError(f"{where}.dropout={self.dropout!r}: must be in [0, 1)")
        for glob, parts in self.rows.items():
            if not isinstance(parts, (list, tuple)) or not parts or not all(isinstance(p, str) for p in parts):
                raise ConfigError(f"{where}.rows[{glob!r}]={parts!r}: give a non-empty list of part names or "
                                  f"'start:stop' strings")


class LoRAUpdate(nn.Module):
    """The low-rank update of one projection: delta = (dropout(x) A^T) B^T * alpha / rank,
    added to the output rows `rows` only (all rows for an unfused projection)."""

    def __init__(self, in_features: int, out_features: int, rows: Rows, c: LoRAConfig,
                 generator: torch.Generator, weight: torch.Tensor) -> None:
        super().__init__()
        self.in_features, self.out_features, self.rows = in_features, out_features, rows
        self.scale = c.alpha / c.rank
        n_rows = sum(b - a for a, b in rows)
        bound = 1 / math.sqrt(in_features)  # = kaiming_uniform_(a=sqrt(5)), torchtune's and nn.Linear's default
        a = torch.empty(c.rank, in_features).uniform_(-bound, bound, generator=generator)
        # fp32 master copies whatever the backbone computes in: an optimiser step smaller than
        # bf16's resolution relative to the weight (2^-8) would otherwise round away
        master = torch.promote_types(weight.dtype, torch.float32)
        self.lora_A = nn.Parameter(a.to(device=weight.device, dtype=master))
        self.lora_B = nn.Parameter(torch.zeros(n_rows, c.rank, device=weight.device, dtype=master))
        self.dropout = nn.Dropout(c.dropout) if c.dropout > 0 else nn.Identity()

    def delta(self, x: torch.Tensor) -> torch.Tensor:
        """x: [..., in_features] -> [..., n_rows] in x's dtype, the update of the chosen rows; the
        masters are cast to the compute dtype at use (gradients flow back to them in fp32)."""
        x = self.dropout(x)
        return (x @ self.lora_A.to(x.dtype).T) @ self.lora_B.to(x.dtype).T * self.scale

    def apply_to(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """x: [..., in], y: [..., out] (the projection's output) -> y with the update added to
        `rows`; the other rows are y's own values, untouched."""
        d = self.delta(x).to(y.dtype)
        if self.rows == ((0, self.out_features),):
            return y + d
        pieces, pos, offset = [], 0, 0
        for a, b in self.rows:
            if a > pos:
                pieces.append(y[..., pos:a])
            pieces.append(y[..., a:b] + d[..., offset:offset + b - a])
            offset, pos = offset + b - a, b
        if pos < self.out_features:
            pieces.append(y[..., pos:])
        return torch.cat(pieces, dim=-1)

    def extra_repr(self) -> str:
        return f"in={self.in_features}, rows={list(self.rows)}, rank={self.lora_A.shape[0]}, scale={self.scale:g}"


class LoRA(nn.Module):
    """A set of LoRA updates attached to one model (implements `memexp.adapters.Adapters`)."""

    kind = "lora"

    def __init__(self, model: nn.Module, config: LoRAConfig, rows: dict[str, Rows] | None = None) -> None:
        """`rows` overrides the row ranges per module name (used by `from_spec`); by default
        they come from `config.rows`."""
        super().__init__()
        config.check()
        self.config = config
        targets = resolve_targets(model, config.targets)
        rows = rows if rows is not None else _rows_from_config(model, targets, config.rows)
        gen = torch.Generator(device="cpu").manual_seed(config.seed)
        self.names = list(targets)
        self.updates = nn.ModuleList(
            LoRAUpdate(m.in_features, m.out_features, rows.get(name, ((0, m.out_features),)), config, gen, m.weight)
            for name, m in targets.items())
        self._modules_of_model = list(targets.values())  # a plain list: not registered, not in our state_dict
        self._handles: list = []
        self._depth = 0

    @property
    def is_enabled(self) -> bool:
        return self._depth > 0

    @contextmanager
    def enabled(self) -> Iterator[None]:
        """Apply the updates inside the block (re-entrant: a nested block changes nothing)."""
        if self._depth == 0:
            self._handles = [module.register_forward_hook(_hook(update))
                             for module, update in zip(self._modules_of_model, self.updates)]
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                for handle in self._handles:
                    handle.remove()
                self._handles = []

    def trainable_parameters(self) -> list[nn.Parameter]:
        return list(self.parameters())

    def spec(self) -> dict:
        c = self.config
        return {
            "kind": self.kind,
            "targets": list(c.targets),
            "rank": c.rank,
            "alpha": c.alpha,
            "dropout": c.dropout,
            "rows": {k: list(v) for k, v in c.rows.items()},
            "seed": c.seed,
            "modules": {name: {"in_features": u.in_features, "out_features": u.out_features,
                               "rows": [list(r) for r in u.rows]}
                        for name, u in zip(self.names, self.updates)},
        }

    def tensors(self) -> dict[str, torch.Tensor]:
        out = {}
        for name, u in zip(self.names, self.updates):
            out[f"{name}.lora_A"] = u.lora_A.detach()
            out[f"{name}.lora_B"] = u.lora_B.detach()
        return out

    @torch.no_grad()
    def load_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        mine = self.tensors()
        missing, extra = sorted(set(mine) - set(tensors)), sorted(set(tensors) - set(mine))
        if missing or extra:
            raise AdapterError(f"adapter tensors do not match: missing {missing[:3]}, unexpected {extra[:3]}")
        for key, dest in mine.items():
            if tuple(tensors[key].shape) != tuple(dest.shape):
                raise AdapterError(f"adapter tensor {key}: saved shape {tuple(tensors[key].shape)}, "
                                   f"this model needs {tuple(dest.shape)}")
            dest.copy_(tensors[key])

    @classmethod
    def from_spec(cls, model: nn.Module, spec: dict) -> "LoRA":
        """The set `spec` describes, attached to `model`; the targets must resolve to the same
        modules with the same shapes and rows, else one AdapterError naming the first difference."""
        config = LoRAConfig(targets=spec["targets"], rank=spec["rank"], alpha=spec["alpha"],
                            dropout=spec["dropout"], rows=spec["rows"], seed=spec["seed"])
        saved = spec["modules"]
        rows = {name: normalise_rows(m["rows"], m["out_features"], name) for name, m in saved.items()}
        lora = cls(model, config, rows=rows)
        if set(lora.names) != set(saved):  # as sets: the spec file stores the modules sorted by name
            missing = sorted(set(saved) - set(lora.names))
            extra = sorted(set(lora.names) - set(saved))
            raise AdapterError(f"the targets resolve to other modules here: saved but absent {missing[:3]}, "
                               f"present but not saved {extra[:3]}")
        for name, u in zip(lora.names, lora.updates):
            m = saved[name]
            if (u.in_features, u.out_features) != (m["in_features"], m["out_features"]):
                raise AdapterError(f"{name}: saved for a {m['in_features']} -> {m['out_features']} projection, "
                                   f"this model's is {u.in_features} -> {u.out_features}")
        return lora


def _hook(update: LoRAUpdate):
    def hook(module: nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor:
        return update.apply_to(args[0], output)
    return hook


def _rows_from_config(model: nn.Module, targets: dict[str, nn.Linear], globs: dict[str, list[str]]) -> dict[str, Rows]:
    rows: dict[str, Rows] = {}
    for glob, parts in globs.items():
        hits = [name for name in targets if fnmatch.fnmatchcase(name, glob)]
        if not hits:
            raise AdapterError(f"adapters.rows: {glob!r} matches none of the targets ({', '.join(list(targets)[:3])}, ...)")
        for name in hits:
            if name in rows:
                raise AdapterError(f"adapters.rows: {name} is matched by more than one glob")
            rows[name] = parse_rows(model, name, parts)
    return rows


def attach_lora(target, config: LoRAConfig) -> LoRA:
    """LoRA updates on `target` (a backbone or an nn.Module), off until `enabled()`."""
    return LoRA(model_of(target), config)
