"""A backbone's cost shapes, from the loaded backbone or from its config without weights.

Each architecture package has a `costs` module, named in its registry entry
(`ARCHS.register(..., costs="memexp.backbones.gdn.costs:cost_shapes")`), that turns the
architecture's config object into `BackboneShapes`: projection FLOPs counted from the model's
Linear layers (`projection_flops`), the conv / recurrence / attention-score terms written out.
Both ways in end in that one function:

    loaded_shapes(backbone, cfg)   the runner: the loaded backbone's own config object
    shapes_for(cfg)                `memexp cost`: the config object parsed from `backbone.model`
                                   (random init), a local config.json, the hub's config.json
                                   (the local cache when offline), or `KNOWN_CONFIGS` for the
                                   paper checkpoints, so `memexp cost backbone=gdn` works offline

Dependencies point one way: the architectures' costs modules import this module and their
own model; this module finds them through the registry, never by import.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from memexp.backbones.meta_device import on_meta_device
from memexp.core.registry import ARCHS, load_object
from memexp.core.schema import BackboneConfig, ConfigError


@dataclass(frozen=True)
class BackboneShapes:
    """What the accounting needs from a checkpoint, all per sequence."""

    layers: int
    hidden_size: int
    vocab_size: int
    flops_token: float  # f_phi
    flops_lm_head: float  # h_phi
    flops_key: float  # per (query, key) pair over attention layers; 0 for pure recurrent models
    window: int | None  # attention window, None = full
    channels: int  # J: addressable recurrent channels (GDN key heads, Mamba-2 groups)
    d_k: int  # key width of a channel
    recurrent_bytes: int
    conv_bytes: int
    kv_bytes_per_token: int  # attention layers' KV cache per retained token
    dtype_bytes: int  # precision of conv windows, KV caches and the matched MHA cache
    channel_layers: tuple[int, ...] = ()  # the recurrent layers, each holding channels / len(...) channels
    arch: str = ""  # the registry name; filled in by `arch_shapes`
    source: str = ""  # where the config came from; filled in by `arch_shapes`


def projection_flops(model_class: Callable[[Any], nn.Module], conf: Any) -> tuple[int, int]:
    """(2 d_in d_out summed over every nn.Linear of the model but its LM head, 2 D V of the
    LM head) per token, counted on the model built from `conf` on the meta device (no memory,
    no weights). Biases, norms, activations and the embedding lookup are not counted (App. C.6).
    The model must name its LM head `lm_head`."""
    with on_meta_device():
        model = model_class(conf)
    head = model.lm_head
    body = sum(2 * m.in_features * m.out_features for m in model.modules()
               if isinstance(m, nn.Linear) and m is not head)
    return body, 2 * head.in_features * head.out_features


def element_bytes(dtype: torch.dtype | str | int) -> int:
    """Bytes per element of a torch dtype, its name, or an int already in bytes."""
    if isinstance(dtype, int):
        return dtype
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    return torch.empty((), dtype=dtype).element_size()


def accounting_dtype_bytes(cfg: BackboneConfig) -> int:
    """The paper's precision (bf16 conv windows, KV caches and matched MHA cache) unless
    backbone.dtype=float32; the same for a loaded backbone and for `memexp cost`, so a run's
    records and the command agree whatever dtype the device chose."""
    return 4 if cfg.dtype == "float32" else 2


def arch_shapes(arch: str, conf: Any, source: str, dtype_bytes: int, window: int | None) -> BackboneShapes:
    """The shapes of an `arch` config object, from the function its registry entry names as
    `costs`: `(config object, dtype_bytes=..., window=...) -> BackboneShapes`."""
    entry = ARCHS.get(arch)
    target = entry.meta.get("costs")
    if target is None:
        raise ConfigError(f"backbone.arch={arch!r}: no cost model registered (ARCHS.register(..., costs="
                          f"'package.module:function'))")
    shapes = load_object(target)(conf, dtype_bytes=dtype_bytes, window=window)
    return replace(shapes, arch=arch, source=source)


def loaded_shapes(backbone: Any, cfg: BackboneConfig) -> BackboneShapes:
    """The shapes of a loaded backbone: its own config object (`backbone.config`)."""
    return arch_shapes(cfg.arch, backbone.config, f"loaded backbone {cfg.name}", accounting_dtype_bytes(cfg),
                       cfg.window)


def shapes_for(cfg: BackboneConfig) -> BackboneShapes:
    """The shapes of a backbone config without its weights, parsed by the architecture's own
    config class (the registry entry's schema) as the builder parses them."""
    fields, source = config_fields(cfg)
    try:
        schema = ARCHS.get(cfg.arch).load_schema()
        if cfg.pretrained is None:
            conf = schema.from_dict(fields, strict=True, where="backbone.model")
        else:
            conf = schema.from_dict(fields, where=source)
        return arch_shapes(cfg.arch, conf, source, accounting_dtype_bytes(cfg), cfg.window)
    except ConfigError:
        raise
    except (KeyError, ValueError) as e:
        raise ConfigError(f"backbone {cfg.name!r} (arch {cfg.arch}): {e}") from None


@dataclass(frozen=True)
class KnownConfig:
    fields: dict
    source: str  # where each number comes from


KNOWN_CONFIGS: dict[str, KnownConfig] = {
    "m-a-p/1.3B-100B-GatedDeltaNet-pure": KnownConfig(
        {"model_type": "gated_deltanet", "hidden_size": 2048, "num_hidden_layers": 24, "num_heads": 8,
         "head_dim": 256, "expand_v": 1, "use_gate": True, "use_short_conv": True, "conv_size": 4,
         "intermediate_size": 5632, "vocab_size": 32000, "tie_word_embeddings": False},
        "built-in shapes: NoteBank paper App. C.6-C.7 (24 layers x 8 heads, d_k = d_v = 256, D = 2048, "
        "c_conv = 4); vocab 32000 from h_phi = 2DV = 1.311e8; MLP 5632 (FLA's rule at hidden_ratio 4) "
        "from f_phi = 2.759e9"),
    "LLM-OS-Models2/gdn2-1.3b-paper-matched": KnownConfig(
        {"model_type": "gdn2_litgpt", "hidden_size": 2304, "num_hidden_layers": 18, "num_heads": 16,
         "head_dim": 128, "expand_v": 1, "conv_size": 4, "intermediate_size": 6208, "vocab_size": 32000,
         "tie_word_embeddings": False},
        "built-in shapes: LitGPT config gdn2_1.3B (n_layer 18, n_embd 2304, LLaMAMLP 6208, vocab 32000) with "
        "NVlabs' GatedDeltaNet2 defaults (16 heads x 128, expand_v 1, conv 4): the paper's 288 channels "
        "(App. C.1); the hub repo holds only the LitGPT .pth"),
    "m-a-p/transformer_1.3B_baseline": KnownConfig(
        {"hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 32, "num_key_value_heads": 8,
         "head_dim": 64, "intermediate_size": 5632, "vocab_size": 32000, "tie_word_embeddings": True},
        "built-in shapes: NoteBank paper App. C.5 (24 layers, width 2048, 32 query / 8 KV heads); MLP 5632, "
        "vocab 32000 and tied embeddings inferred from its 1.148B unique parameters"),
    "state-spaces/mamba2-1.3b": KnownConfig(
        {"d_model": 2048, "n_layer": 48, "vocab_size": 50277, "pad_vocab_size_multiple": 16,
         "ssm_cfg": {"layer": "Mamba2"}, "tie_embeddings": True},
        "built-in shapes: d_model 2048, 48 layers, vocab 50277 padded to 16 as commonly reported for "
        "mamba2-1.3b (not read from the hub); d_state 128, headdim 64, expand 2, 1 group, d_conv 4 are "
        "mamba_ssm's Mamba2 defaults"),
}


def _offline() -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return True
    from memexp.backbones.loading import hub_reachable

    return not hub_reachable()


def config_fields(cfg: BackboneConfig) -> tuple[dict, str]:
    """(config.json fields, where they came from) of `cfg`, without loading weights."""
    if cfg.pretrained is None:
        return dict(cfg.model), f"backbone.model of {cfg.name} (random init)"
    path = Path(cfg.pretrained).expanduser()
    if path.is_dir():
        file = path / "config.json"
        if not file.is_file():
            raise ConfigError(f"backbone.pretrained={cfg.pretrained!r}: no config.json in that directory")
        return json.loads(file.read_text()), str(file)
    try:
        from huggingface_hub import hf_hub_download

        file = hf_hub_download(cfg.pretrained, "config.json", revision=cfg.revision, local_files_only=_offline())
        return json.loads(Path(file).read_text()), f"{cfg.pretrained}/config.json"
    except Exception as e:
        known = KNOWN_CONFIGS.get(cfg.pretrained)
        if known is not None:
            return dict(known.fields), known.source
        raise ConfigError(
            f"backbone.pretrained={cfg.pretrained!r}: its config.json is not available ({type(e).__name__}) and "
            f"memexp has no built-in shapes for it; download it once online or point backbone.pretrained at a "
            f"directory holding config.json") from None
