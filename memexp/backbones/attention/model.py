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

import torch
import torch.nn.functional as F
from torch import nn

from memexp.backbones.base import Observer, Tokenizer
from memexp.backbones.gdn.model import RMSNorm, fla_mlp_width
from memexp.backbones.loading import (
    BackboneLoadError,
    WeightFiles,
    check_vocab,
    load_tokenizer,
    load_weights,
    new_model,
    read_chat_template,
    read_config,
    resolve_device,
    resolve_dtype,
    resolve_pretrained,
)
from memexp.backbones.ops.attention import KVCache, attention
from memexp.backbones.ops.rotary import Rope, apply_rotary, rope_from_config
from memexp.backbones.stack import LayerStackBackbone, LayerStates
from memexp.config import BackboneConfig, ConfigError

LLAMA_INERT_FIELDS = {  # transformers LlamaConfig fields that do not change inference results
    "model_type", "architectures", "transformers_version", "torch_dtype", "dtype", "use_cache", "pad_token_id",
    "attention_dropout", "initializer_range", "pretraining_tp", "max_position_embeddings", "hidden_act",
}


@dataclass
class AttentionConfig:
    """The architecture, with the field names of transformers' LlamaConfig. `rope_theta`,
    `rope_scaling` and `rope_parameters` are read by `rope_from_config`."""

    hidden_size: int = 2048
    num_hidden_layers: int = 16
    num_attention_heads: int = 32
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    intermediate_size: int = 8192
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None
    rope_parameters: dict | None = None
    max_position_embeddings: int | None = None
    attention_bias: bool = False
    output_bias: bool | None = None  # o_proj bias; None: attention_bias (Llama), FLA has none
    mlp_bias: bool = False
    window: int | None = None
    vocab_size: int = 128256
    tie_word_embeddings: bool = False
    bos_token_id: int | None = None
    eos_token_id: int | list | None = None
    hidden_act: str = "silu"

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


class SwiGLU(nn.Module):
    """down(silu(gate x) * up x): the MLP of Llama, Qwen3.5, FLA's GatedMLP and LitGPT's LLaMAMLP."""

    def __init__(self, hidden: int, inner: int, bias: bool = False) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inner, bias=bias)
        self.up_proj = nn.Linear(hidden, inner, bias=bias)
        self.down_proj = nn.Linear(inner, hidden, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


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
        """x: [1, T, hidden]; cos, sin: [T, rotary_dim] at the tokens' absolute positions."""
        c = self.c
        T, hd = x.shape[1], c.dim_per_head
        q = apply_rotary(self.q_proj(x).view(1, T, c.num_attention_heads, hd), cos, sin)
        k = apply_rotary(self.k_proj(x).view(1, T, c.kv_heads, hd), cos, sin)
        keys, values = cache.append(k, self.v_proj(x).view(1, T, c.kv_heads, hd))
        o = attention(q, keys, values, window=cache.window)
        cache.trim()
        return self.o_proj(o.reshape(1, T, -1))


class DecoderLayer(nn.Module):
    def __init__(self, c: AttentionConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = SelfAttention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = SwiGLU(c.hidden_size, c.intermediate_size, c.mlp_bias)


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

    @torch.no_grad()
    def init_weights(self, seed: int) -> None:
        """Normal(0, 0.02) matrices, unit norms, zero biases, reproducible from `seed`."""
        gen = torch.Generator(device="cpu").manual_seed(seed)
        for name, p in self.named_parameters():
            if name.endswith("norm.weight") or name.endswith("layernorm.weight"):
                p.fill_(1.0)
            elif name.endswith("bias"):
                p.zero_()
            else:
                p.copy_(torch.empty(p.shape).normal_(0.0, 0.02, generator=gen))


@dataclass
class AttentionState(LayerStates):
    """Per layer: the KV cache (keys after RoPE) [1, T, Hkv, D] in the compute dtype."""

    RECURRENT_FIELDS = ()  # no recurrent memory: scale_recurrent keeps KV caches and positions

    kv: list[KVCache]
    position: int = 0


class AttentionBackbone(LayerStackBackbone):
    """A decoder-only Transformer at batch size 1, full or sliding-window attention."""

    def __init__(self, model: LlamaForCausalLM, tokenizer: Tokenizer, name: str, prefill_chunk: int,
                 window: int | None) -> None:
        super().__init__(model, tokenizer, name, prefill_chunk)
        self.window = window
        self.channels = []
        self.rope = self.config.rope().to(self.device)

    def init_state(self) -> AttentionState:
        c = self.config
        return AttentionState([KVCache.empty(1, c.kv_heads, c.dim_per_head, self.dtype, self.device, self.window)
                               for _ in range(c.num_hidden_layers)])

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.model.embed_tokens(ids)[None]

    def _layers(self, state: AttentionState, x: torch.Tensor, observer: Observer | None, start: int) -> torch.Tensor:
        first = state.position + start
        cos, sin = self.rope.cos_sin(torch.arange(first, first + x.shape[1], device=self.device), x.dtype)
        for layer, cache in zip(self.model.model.layers, state.kv):
            x = x + layer.self_attn(layer.input_layernorm(x), cos, sin, cache)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return x

    def _final_norm(self, last: torch.Tensor) -> torch.Tensor:
        return self.model.model.norm(last)


def build(cfg: BackboneConfig) -> AttentionBackbone:
    """An attention backbone from a Llama or FLA Transformer checkpoint (`cfg.pretrained`) or
    random weights (`cfg.model`, Llama field names). `cfg.window` sets a sliding window."""
    device = resolve_device(cfg.device)
    dtype = resolve_dtype(cfg.dtype, device)
    template = None
    if cfg.pretrained is not None:
        if cfg.model:
            raise ConfigError(f"backbone.model: fields are for random init only; the architecture of "
                              f"{cfg.pretrained!r} comes from its config.json (set backbone.model={{}})")
        directory = resolve_pretrained(cfg.pretrained, cfg.revision)
        raw = read_config(directory)
        conf = AttentionConfig.from_dict(raw, where=str(directory / "config.json"))
        model = new_model(LlamaForCausalLM, conf, device, dtype)
        rename = fla_to_llama_name if raw.get("model_type") == "transformer" else None
        load_weights(model, WeightFiles(directory), rename=rename, source=str(directory))
        tokenizer = load_tokenizer(cfg.tokenizer, directory)
        template = read_chat_template(directory, cfg.pretrained, cfg.revision)
    else:
        conf = AttentionConfig.from_dict(cfg.model, strict=True, where="backbone.model")
        model = new_model(LlamaForCausalLM, conf, device, dtype, seed=cfg.seed)
        tokenizer = load_tokenizer(cfg.tokenizer or "byte")
    check_vocab(tokenizer, conf.vocab_size)
    backbone = AttentionBackbone(model, tokenizer, cfg.name, cfg.prefill_chunk, cfg.window or conf.window)
    backbone.chat_template = template
    return backbone

