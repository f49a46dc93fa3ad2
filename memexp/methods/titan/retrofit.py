"""Turning a Llama-style backbone into Titan-Llama, and the trained modules' file.

    modules = retrofit(backbone, cfg)      # layers 0 .. cfg.layers - 1 become TitanLayers, backbone frozen
    logits = backbone.train_forward(ids)   # differentiable w.r.t. modules.parameters() (the training form)
    modules.save("out/titan")              # titan_memory.safetensors + titan_memory.json
    modules.load("out/titan")              # into a retrofit with the same config and shapes

`TitanModules` holds exactly the trainable parameters, named `layers.<i>.memory.{w1,w2,w3}`,
`layers.<i>.memory.{theta,eta,alpha}.{weight,bias}`, `layers.<i>.gate.{weight,bias}`,
`layers.<i>.value_mix.{weight,bias}`; they are in `method.memory_dtype` (fp32 by default, whatever
the compute dtype; bf16 as in the authors' runs) on the backbone's device, and the memory runs in
that dtype. The file always holds fp32 tensors (bf16 values convert exactly both ways), and
memory_dtype is not part of what a file must match. The same modules sit in the backbone's tree under
`model.model.layers.<i>.titan.*`, so the backbone's own tensor names never change.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from memexp.backbones.stack import LayerStackBackbone
from memexp.core.schema import ConfigError
from memexp.methods.titan.config import MODULE_FILES, TitanConfig
from memexp.methods.titan.layer import TitanBlock, TitanLayer, ValueCarry
from memexp.methods.titan.memory import NeuralMemory

SPEC_FILE, TENSOR_FILE = MODULE_FILES
INIT_SEED = 0  # the rate projections' default (random) init is drawn from this seed: runs are reproducible
SHAPE_FIELDS = ("hidden_size", "num_attention_heads", "kv_heads", "head_dim", "num_hidden_layers")


def titan_layers(cfg: TitanConfig, num_layers: int) -> list[int]:
    """Indices of the layers that become Titan layers: the first cfg.layers, and with
    local_later_layers every later one too (those without memory)."""
    return list(range(num_layers if cfg.local_later_layers else cfg.layers))


def _has_memory(cfg: TitanConfig, index: int) -> bool:
    return cfg.memory and index < cfg.layers


class TitanModules(nn.Module):
    """The trainable modules of a retrofit (one TitanBlock per Titan layer), their config and the
    backbone shapes they were made for."""

    def __init__(self, cfg: TitanConfig, shapes: dict[str, int]) -> None:
        super().__init__()
        self.cfg, self.shapes = cfg, dict(shapes)
        D, H, Hk, hd = (shapes[k] for k in ("hidden_size", "num_attention_heads", "kv_heads", "head_dim"))
        indices = titan_layers(cfg, shapes["num_hidden_layers"])
        blocks = {}
        for i in indices:
            memory = (NeuralMemory(Hk, hd, cfg.segment_length, cfg.test_batch, cfg.max_lr, cfg.decay_target)
                      if _has_memory(cfg, i) else None)
            blocks[str(i)] = TitanBlock(D, H, Hk, hd, memory, value_mix=cfg.value_residual and i != indices[0])
        self.layers = nn.ModuleDict(blocks)

    def record_stats(self, on: bool = True) -> None:
        """Start (or stop) keeping each layer's last-call figures for training curves (`stats`)."""
        for block in self.layers.values():
            block.stats = {} if on else None
            if block.memory is not None:
                block.memory.stats = {} if on else None

    def stats(self) -> dict[str, float]:
        """`layer<i>/<name>` -> the last forward call's mean of lambda (the gate, zero before the first
        chunk), theta, eta, alpha and the unweighted inner loss before each update (recorded only
        after `record_stats()`; a figure appears once a call has produced it)."""
        out = {}
        for i, block in self.layers.items():
            for source in (block.stats, None if block.memory is None else block.memory.stats):
                for name, value in (source or {}).items():
                    out[f"layer{i}/{name}"] = float(value)
        return out

    def spec(self) -> dict:
        """What the file must match: the config (less its path) and the backbone shapes."""
        config = {k: v for k, v in asdict(self.cfg).items() if k not in ("name", "memory_path", "memory_dtype")}
        return {"kind": "titan", "config": config, "shapes": self.shapes}

    def save(self, directory: str | Path) -> None:
        """Write titan_memory.json (spec) and titan_memory.safetensors (fp32 tensors) into `directory`."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / SPEC_FILE).write_text(json.dumps(self.spec(), indent=2, sort_keys=True) + "\n")
        save_file({k: t.detach().float().contiguous().cpu() for k, t in self.state_dict().items()},
                  str(directory / TENSOR_FILE))

    @torch.no_grad()
    def load(self, directory: str | Path) -> None:
        """Read what `save` wrote into these modules; a file made for another config, other shapes or
        other tensor names raises one ConfigError naming the first difference."""
        directory = Path(directory)
        where = f"method.memory_path={str(directory)!r}"
        if not (directory / SPEC_FILE).is_file() or not (directory / TENSOR_FILE).is_file():
            raise ConfigError(f"{where}: not a Titan modules folder (needs {SPEC_FILE} and {TENSOR_FILE})")
        spec, mine = json.loads((directory / SPEC_FILE).read_text()), self.spec()
        for group in ("config", "shapes"):
            for key, value in mine[group].items():
                if spec.get(group, {}).get(key) != value:
                    raise ConfigError(f"{where}: saved with {key}={spec.get(group, {}).get(key)!r}, this run has "
                                      f"{key}={value!r}")
        tensors, own = load_file(str(directory / TENSOR_FILE)), self.state_dict()
        if set(tensors) != set(own):
            odd = sorted(set(tensors) ^ set(own))[0]
            raise ConfigError(f"{where}: tensor {odd!r} is in only one of the file and this retrofit")
        for name, t in tensors.items():
            if t.shape != own[name].shape:
                raise ConfigError(f"{where}: {name} has shape {list(t.shape)}, expected {list(own[name].shape)}")
            own[name].copy_(t)


def backbone_shapes(backbone: LayerStackBackbone) -> dict[str, int]:
    c = backbone.config
    return {"hidden_size": c.hidden_size, "num_attention_heads": c.num_attention_heads, "kv_heads": c.kv_heads,
            "head_dim": c.dim_per_head, "num_hidden_layers": len(backbone.layers)}


def _check(backbone: LayerStackBackbone, cfg: TitanConfig) -> None:
    from memexp.backbones.attention.model import DecoderLayer

    layers = backbone.layers if isinstance(backbone, LayerStackBackbone) else None
    if layers is None or not all(isinstance(layer, DecoderLayer) for layer in layers):
        raise ConfigError(f"method=titan: backbone={getattr(backbone, 'name', backbone)!r} is not a Llama-style "
                          f"attention backbone with untouched layers (arch llama); Titan replaces its attention layers")
    if cfg.layers > len(layers):
        raise ConfigError(f"method.layers={cfg.layers}: the backbone has only {len(layers)} layers")


def retrofit(backbone: LayerStackBackbone, cfg: TitanConfig) -> TitanModules:
    """Freeze the backbone, make the Titan modules (identity memories, gates at 5 %, closed value
    mixers; in cfg.memory_dtype on the backbone's device) and install a TitanLayer at every Titan index."""
    _check(backbone, cfg)
    for p in backbone.model.parameters():
        p.requires_grad_(False)
    with torch.random.fork_rng(devices=[]):  # made on the CPU: the same initial values on every device
        torch.manual_seed(INIT_SEED)
        modules = TitanModules(cfg, backbone_shapes(backbone))  # drawn in fp32, then cast: the same values
    modules = modules.to(backbone.device, dtype=getattr(torch, cfg.memory_dtype))
    carry = ValueCarry()
    indices = titan_layers(cfg, len(backbone.layers))
    for pos, i in enumerate(indices):
        passes = pos + 1 < len(indices) and modules.layers[str(indices[pos + 1])].value_mix is not None
        layer = TitanLayer(backbone.layers[i], modules.layers[str(i)], cfg.segment_length, cfg.rope_memory, carry,
                           passes)
        backbone.replace_layer(i, layer)
    return modules
