"""A backbone's architecture fields without its weights, for cost accounting.

`backbone.model` (random init) is used as is; a local `backbone.pretrained` directory gives its
config.json; a hub id gives the hub's config.json (from the local cache when offline or the hub
is unreachable). When that fails, the paper checkpoints fall back to `KNOWN_CONFIGS`, so
`python -m memexp cost backbone=gdn` works offline.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from memexp.config import BackboneConfig, ConfigError
from memexp.costs import BackboneShapes, backbone_shapes


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


def shapes_for(cfg: BackboneConfig) -> BackboneShapes:
    """The accounting shapes of a backbone config: bf16 conv windows, KV caches and matched
    MHA cache (the paper's precision) unless backbone.dtype=float32."""
    fields, source = config_fields(cfg)
    try:
        return backbone_shapes(cfg.arch, fields, source, dtype=4 if cfg.dtype == "float32" else 2,
                               window=cfg.window)
    except (KeyError, ValueError) as e:
        raise ConfigError(f"backbone {cfg.name!r} (arch {cfg.arch}): {e}") from None
