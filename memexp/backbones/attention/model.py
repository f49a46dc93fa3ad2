"""Attention-only Transformers (Llama-3.2, the M-A-P 1.3B Transformer baseline) behind the
native memory interface: the structure Titan-Llama later modifies.

Reads transformers' Llama checkpoints (model_type 'llama': meta-llama/Llama-3.2-1B-Instruct)
and FLA's Transformer checkpoints (model_type 'transformer': m-a-p/transformer_1.3B_baseline,
renamed onto the same modules). Modules are named like transformers' LlamaForCausalLM.

Per block: x += o_proj(attention(rope(q), rope(k), v)); x += mlp(x), both pre-norm, where
attention reads the layer's KV cache (grouped KV heads) and positions continue from the
state's position counter, so replay and question follow the context. With
`backbone.window=W` (or an FLA config's window_size) each query sees only the last W
positions, itself included (the papers' SW4K with W = 4096), and the cache keeps W - 1.

Attention backbones have no recurrent channels: `channels` is empty, the observer is
never called, and `State.scale_recurrent` scales nothing (KV caches and positions are kept,
as the interface defines).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import torch
from torch import nn

from memexp.backbones.base import Tokenizer
from memexp.backbones.build import Architecture, Checkpoint, build_backbone
from memexp.backbones.kv_cache import KVCache
from memexp.backbones.loading import BackboneLoadError, WeightFiles, read_config
from memexp.backbones.modules import GatedMLP, RMSNorm, fla_mlp_width, random_init
from memexp.backbones.rotary import Rope, apply_rotary, rope_from_config
from memexp.backbones.stack import Layer, LayerContext, LayerStackBackbone, StateSpec
from memexp.core.schema import BackboneConfig, ConfigError
from memexp.kernels.attention import attention

LLAMA_INERT_FIELDS = {  # transformers LlamaConfig fields that do not change inference results
    "model_type", "architectures", "transformers_version", "torch_dtype", "dtype", "use_cache", "pad_token_id",
    "attention_dropout", "initializer_range", "pretraining_tp", "max_position_embeddings", "hidden_act",
}


@dataclass
class AttentionConfig:
    """The architecture, with the field names of transformers' LlamaConfig. `rope_theta`,
    `rope_scaling` and `rope_parameters` are read by `rope_from_config`."""

    hidden_size: int = 2048  # the residual stream's width
    num_hidden_layers: int = 16  # decoder blocks
    num_attention_heads: int = 32  # query heads
    num_key_value_heads: int | None = None  # key / value heads (grouped-query attention); null = num_attention_heads
    head_dim: int | None = None  # dimension per head; null = hidden_size / num_attention_heads
    intermediate_size: int = 8192  # the MLP's width
    rms_norm_eps: float = 1e-5  # RMSNorm epsilon
    rope_theta: float = 10000.0  # RoPE's base
    rope_scaling: dict | None = None  # RoPE scaling, the layout of transformers before 5 (with rope_theta)
    rope_parameters: dict | None = None  # RoPE theta, type and scaling in one dict, transformers 5's layout
    max_position_embeddings: int | None = None  # the positions RoPE is configured for
    attention_bias: bool = False  # biases on q / k / v (and o, see output_bias)
    output_bias: bool | None = None  # o_proj bias; None: attention_bias (Llama), FLA has none
    mlp_bias: bool = False  # biases in the MLP
    window: int | None = None  # sliding-window attention over the last W positions (FLA's window_size); null = full
    vocab_size: int = 128256  # tokens in the embedding and the LM head
    tie_word_embeddings: bool = False  # the LM head shares the embedding matrix
    bos_token_id: int | None = None  # the tokenizer's beginning-of-sequence id
    eos_token_id: int | list | None = None  # the tokenizer's end-of-sequence id(s)
    hidden_act: str = "silu"  # the MLP's activation

    @classmethod
    def from_dict(cls, values: dict, strict: bool = False, where: str = "config.json") -> "AttentionConfig":
        """From a Llama or FLA Transformer config.json, or `backbone.model` in Llama's field
        names (strict: unknown keys are errors)."""
        kind = values.get("model_type", "llama")
        if kind == "transformer":
            return cls.from_fla(values, where)
        if kind != "llama":
            raise BackboneLoadError(f"{where}: model_type={kind!r} is neither 'llama' nor FLA's 'transformer'; "
                                    f"choose the matching backbone.arch")
        known = {f.name for f in fields(cls)} - {"output_bias"}
        if strict:
            for key in values:
                if key not in known and key not in LLAMA_INERT_FIELDS:
                    raise ConfigError(f"{where}.{key}: unknown field; allowed fields are {', '.join(sorted(known))}")
        conf = cls(**{k: v for k, v in values.items() if k in known})
        if conf.hidden_act != "silu":
            raise BackboneLoadError(f"{where}: hidden_act={conf.hidden_act!r}; only 'silu' is supported")
        return conf

    @classmethod
    def from_fla(cls, values: dict, where: str) -> "AttentionConfig":
        """FLA's TransformerConfig: num_heads / num_kv_heads, head_dim = hidden / heads,
        intermediate size by GatedMLP's rule, q/k/v bias = qkv_bias, no bias on o_proj."""
        if values.get("qk_norm"):
            raise BackboneLoadError(f"{where}: qk_norm=true is not supported by memexp's attention backbone")
        if values.get("attnres_block_size") is not None:
            raise BackboneLoadError(f"{where}: attnres_block_size is not supported by memexp's attention backbone")
        if values.get("hidden_act", "swish") not in ("swish", "silu"):
            raise BackboneLoadError(f"{where}: hidden_act={values['hidden_act']!r}; only swish is supported")
        hidden = values["hidden_size"]
        inner = values.get("intermediate_size") or fla_mlp_width(hidden, values.get("hidden_ratio"))
        return cls(
            hidden_size=hidden,
            num_hidden_layers=values["num_hidden_layers"],
            num_attention_heads=values["num_heads"],
            num_key_value_heads=values.get("num_kv_heads"),
            head_dim=hidden // values["num_heads"],
            intermediate_size=inner,
            rms_norm_eps=values.get("norm_eps", 1e-6),
            rope_theta=values.get("rope_theta") or 10000.0,
            max_position_embeddings=values.get("max_position_embeddings"),
            attention_bias=values.get("qkv_bias", False),
            output_bias=False,
            window=values.get("window_size"),
            vocab_size=values["vocab_size"],
            tie_word_embeddings=values.get("tie_word_embeddings", False),
            bos_token_id=values.get("bos_token_id"),
            eos_token_id=values.get("eos_token_id"),
        )

    @property
    def kv_heads(self) -> int:
        return self.num_key_value_heads or self.num_attention_heads

    @property
    def dim_per_head(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    def rope(self) -> Rope:
        return rope_from_config(
            {"rope_theta": self.rope_theta, "rope_scaling": self.rope_scaling, "rope_parameters": self.rope_parameters,
             "max_position_embeddings": self.max_position_embeddings},
            self.dim_per_head,
        )


def fla_to_llama_name(name: str) -> str:
    """FLA Transformer tensor names onto the Llama module tree."""
    return (name.replace("model.embeddings.", "model.embed_tokens.")
            .replace(".attn_norm.", ".input_layernorm.")
            .replace(".mlp_norm.", ".post_attention_layernorm.")
            .replace(".attn.", ".self_attn."))


class SelfAttention(nn.Module):
    """Grouped-query attention with RoPE over a KV cache."""

    def __init__(self, c: AttentionConfig) -> None:
        super().__init__()
        self.c = c
        D, H, Hkv, hd = c.hidden_size, c.num_attention_heads, c.kv_heads, c.dim_per_head
        self.q_proj = nn.Linear(D, H * hd, bias=c.attention_bias)
        self.k_proj = nn.Linear(D, Hkv * hd, bias=c.attention_bias)
        self.v_proj = nn.Linear(D, Hkv * hd, bias=c.attention_bias)
        self.o_proj = nn.Linear(H * hd, D, bias=c.attention_bias if c.output_bias is None else c.output_bias)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """x: [B, T, hidden]; cos, sin: [T, rotary_dim] at the tokens' absolute positions;
        `cache` (batch B) gains the chunk's keys and values. Returns [B, T, hidden]."""
        c = self.c
        B, T, hd = x.shape[0], x.shape[1], c.dim_per_head
        q = apply_rotary(self.q_proj(x).view(B, T, c.num_attention_heads, hd), cos, sin)
        k = apply_rotary(self.k_proj(x).view(B, T, c.kv_heads, hd), cos, sin)
        keys, values = cache.append(k, self.v_proj(x).view(B, T, c.kv_heads, hd))
        o = attention(q, keys, values, window=cache.window, mask=cache.attention_mask())
        cache.trim()
        return self.o_proj(o.reshape(B, T, -1))


# The module tree below mirrors transformers' LlamaForCausalLM: attribute paths are the
# checkpoint's tensor names (the other architectures keep parallel trees for the same reason).
class DecoderLayer(Layer):
    """x += self_attn(input_layernorm(x)); x += mlp(post_attention_layernorm(x)); state: the KV cache."""

    def __init__(self, c: AttentionConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = SelfAttention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = GatedMLP(c.hidden_size, c.intermediate_size, c.mlp_bias)

    def forward(self, x: torch.Tensor, cache: KVCache, ctx: LayerContext):
        x = x + self.self_attn(self.input_layernorm(x), *ctx.rotary, cache)
        return x + self.mlp(self.post_attention_layernorm(x)), cache

    def init_state(self, spec: StateSpec) -> KVCache:
        """An empty KV cache [B, 0, Hkv, head_dim] keeping `spec.window - 1` tokens with a window."""
        c = self.self_attn.c
        return KVCache.empty(spec.batch, c.kv_heads, c.dim_per_head, spec.dtype, spec.device, spec.window)


class Trunk(nn.Module):
    def __init__(self, c: AttentionConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(c) for _ in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)


class LlamaForCausalLM(nn.Module):
    """Parameter tree of transformers' LlamaForCausalLM (same state_dict keys)."""

    def __init__(self, c: AttentionConfig) -> None:
        super().__init__()
        self.config = c
        self.model = Trunk(c)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        if c.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def init_weights(self, seed: int) -> None:
        """Normal(0, 0.02) matrices, unit norms, zero biases, reproducible from `seed`."""
        random_init(self, seed)


class AttentionBackbone(LayerStackBackbone):
    """A decoder-only Transformer at batch size 1, full or sliding-window attention (`window`,
    else the config's window_size)."""

    def __init__(self, model: LlamaForCausalLM, tokenizer: Tokenizer, name: str, prefill_chunk: int,
                 window: int | None = None) -> None:
        super().__init__(model, tokenizer, name, prefill_chunk, window or model.config.window)
        self.rope = self.config.rope().to(self.device)

    @property
    def layers(self) -> nn.ModuleList:
        return self.model.model.layers

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.model.embed_tokens(ids)

    def _final_norm(self, last: torch.Tensor) -> torch.Tensor:
        return self.model.model.norm(last)


def read_checkpoint(directory: Path, overrides: dict, parse) -> Checkpoint:
    """A Llama checkpoint, or FLA's Transformer renamed onto the Llama tree."""
    raw = read_config(directory)
    rename = fla_to_llama_name if raw.get("model_type") == "transformer" else None
    return Checkpoint(parse(raw, where=str(directory / "config.json")), WeightFiles(directory), str(directory), rename)


ARCHITECTURE = Architecture(parse=AttentionConfig.from_dict, model=LlamaForCausalLM, backbone=AttentionBackbone,
                            keep_fp32=(), read=read_checkpoint, chat_template=True)


def build(cfg: BackboneConfig) -> AttentionBackbone:
    """An attention backbone from a Llama or FLA Transformer checkpoint (`cfg.pretrained`) or
    random weights (`cfg.model`, Llama field names). `cfg.window` sets a sliding window."""
    return build_backbone(cfg, ARCHITECTURE)
