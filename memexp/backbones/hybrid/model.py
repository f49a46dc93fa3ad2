"""Qwen3.5 (Qwen/Qwen3.5-9B: 24 Gated DeltaNet + 8 gated-attention layers) behind the native
memory interface.

Reads transformers' Qwen3.5 checkpoints: the vision-language release (config.json with a
`text_config`, tensors under `model.language_model.`, vision tower and MTP head ignored)
and text-only Qwen3_5ForCausalLM saves (model_type 'qwen3_5_text', tensors under `model.`).
Modules are named like transformers' Qwen3_5ForCausalLM.

Per block: x += mixer(input_layernorm(x)); x += mlp(post_attention_layernorm(x)), every
RMSNorm zero-centred (scale 1 + weight). The mixer is either

    linear_attn (GDN):  q|k|v = silu(short_conv(in_proj_qkv x))          carried raw window
                        q, k = l2_norm(q), l2_norm(k)  [T, Hk, K]          -> observer
                        g, beta = -exp(A_log) softplus(in_proj_a x + dt_bias), sigmoid(in_proj_b x)
                        o = gated_delta_rule(q, k, v, g, beta)            Hv = 2 Hk value heads
                        out = out_proj(rms_norm(o) * norm.weight * silu(in_proj_z x))
    self_attn:          q|gate = q_proj x per head; q, k = rope(zc_norm(q)), rope(zc_norm(k))
                        out = o_proj(attention(q, k, v | KV cache) * sigmoid(gate))

RoPE rotates the first partial_rotary_factor of each head; for text the three M-RoPE
sections share one position, which is ordinary RoPE. Positions continue from the state's
counter (replay and question follow the context). The official long-context setup (YaRN,
factor 4 over 262,144 positions) is switched on by `backbone.model.rope_parameters`, the
one architecture field a checkpoint's config may be overridden with (conf/backbone/qwen35_9b.yaml).

Channels: the key heads of the GDN layers only. `scale_recurrent` scales the GDN states;
KV caches, conv windows and the position counter are kept.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import torch
from torch import nn

from memexp.backbones.base import Channel, Tokenizer
from memexp.backbones.build import Architecture, Checkpoint, build_backbone
from memexp.backbones.gdn_gate import gdn_gate
from memexp.backbones.kv_cache import KVCache
from memexp.backbones.loading import BackboneLoadError, WeightFiles, read_config
from memexp.backbones.modules import GatedMLP, RMSNorm, named_rows, random_init
from memexp.backbones.norms import gated_rms_norm, rms_norm
from memexp.backbones.rotary import Rope, apply_rotary, rope_from_config
from memexp.backbones.stack import Layer, LayerContext, LayerStackBackbone, RecurrentState, StateSpec
from memexp.core.schema import BackboneConfig, ConfigError
from memexp.kernels.attention import attention
from memexp.kernels.gated_delta_rule import gated_delta_rule
from memexp.kernels.l2norm import l2_norm
from memexp.kernels.short_conv import short_conv

INERT_FIELDS = {  # Qwen3_5TextConfig fields that do not change text inference
    "model_type", "architectures", "transformers_version", "torch_dtype", "dtype", "use_cache", "pad_token_id",
    "attention_dropout", "initializer_range", "full_attention_interval", "hidden_act", "mtp_num_hidden_layers",
    "mtp_use_dedicated_embeddings", "output_router_logits", "router_aux_loss_coef",
}
PRETRAINED_OVERRIDES = ("rope_parameters", "max_position_embeddings")
IGNORED_TENSORS = [r"^model\.visual\.", r"^mtp\."]


@dataclass
class HybridConfig:
    """The text architecture, with the field names and defaults of transformers'
    Qwen3_5TextConfig ("Qwen3.5-9B style")."""

    vocab_size: int = 248320  # tokens in the embedding and the LM head
    hidden_size: int = 4096  # the residual stream's width
    intermediate_size: int = 12288  # the MLP's width
    num_hidden_layers: int = 32  # blocks (GDN and gated attention, see layer_types)
    num_attention_heads: int = 16  # query heads of the attention layers
    num_key_value_heads: int = 4  # key / value heads of the attention layers
    head_dim: int = 256  # dimension per attention head
    rms_norm_eps: float = 1e-6  # RMSNorm epsilon
    linear_conv_kernel_dim: int = 4  # taps of the GDN layers' short convs
    linear_key_head_dim: int = 128  # key dimension per GDN head
    linear_value_head_dim: int = 128  # value dimension per GDN head
    linear_num_key_heads: int = 16  # query / key heads of the GDN layers
    linear_num_value_heads: int = 32  # value heads of the GDN layers
    layer_types: list | None = None  # "linear_attention" (GDN) or "full_attention" per layer; null = every full_attention_interval-th (4) full
    # RoPE type, theta, partial rotary factor and YaRN scaling of the attention layers
    rope_parameters: dict | None = None
    max_position_embeddings: int = 262144  # the positions RoPE is configured for
    attention_bias: bool = False  # biases on q / k / v / o
    tie_word_embeddings: bool = False  # the LM head shares the embedding matrix
    bos_token_id: int | None = None  # the tokenizer's beginning-of-sequence id
    eos_token_id: int | list | None = None  # the tokenizer's end-of-sequence id(s)

    @classmethod
    def from_dict(cls, values: dict, strict: bool = False, where: str = "config.json") -> "HybridConfig":
        """From a Qwen3.5 config.json (its `text_config` when present; unknown keys ignored),
        or from `backbone.model` (strict: unknown keys are errors)."""
        if "text_config" in values:
            values = values["text_config"]
            where = f"{where}.text_config"
        kind = values.get("model_type", "qwen3_5_text")
        if kind not in ("qwen3_5_text", "qwen3_5"):
            raise BackboneLoadError(f"{where}: model_type={kind!r} is not Qwen3.5 ('qwen3_5_text'); "
                                    f"choose the matching backbone.arch")
        known = {f.name for f in fields(cls)}
        if strict:
            for key in values:
                if key not in known and key not in INERT_FIELDS:
                    raise ConfigError(f"{where}.{key}: unknown field; allowed fields are {', '.join(sorted(known))}")
        if values.get("hidden_act", "silu") != "silu":
            raise BackboneLoadError(f"{where}: hidden_act={values['hidden_act']!r}; only 'silu' is supported")
        conf = cls(**{k: v for k, v in values.items() if k in known})
        if conf.layer_types is None:
            interval = values.get("full_attention_interval", 4)
            conf.layer_types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
                                for i in range(conf.num_hidden_layers)]
        if conf.rope_parameters is None:
            conf.rope_parameters = {"rope_type": "default", "rope_theta": values.get("rope_theta", 10000000.0),
                                    "partial_rotary_factor": values.get("partial_rotary_factor", 0.25)}
        conf.check(where)
        return conf

    def check(self, where: str) -> None:
        if len(self.layer_types) != self.num_hidden_layers:
            raise ConfigError(f"{where}.layer_types: {len(self.layer_types)} entries for {self.num_hidden_layers} layers")
        bad = set(self.layer_types) - {"linear_attention", "full_attention"}
        if bad:
            raise ConfigError(f"{where}.layer_types: {sorted(bad)}; allowed values are linear_attention, full_attention")
        if self.linear_num_value_heads % self.linear_num_key_heads:
            raise ConfigError(f"{where}.linear_num_value_heads={self.linear_num_value_heads}: must be a multiple of "
                              f"linear_num_key_heads={self.linear_num_key_heads}")

    @property
    def key_dim(self) -> int:
        return self.linear_num_key_heads * self.linear_key_head_dim

    @property
    def value_dim(self) -> int:
        return self.linear_num_value_heads * self.linear_value_head_dim

    @property
    def conv_dim(self) -> int:
        return 2 * self.key_dim + self.value_dim

    def rope(self) -> Rope:
        return rope_from_config({"rope_parameters": self.rope_parameters,
                                 "max_position_embeddings": self.max_position_embeddings}, self.head_dim)


class ZeroCenteredRMSNorm(nn.Module):
    """rms_norm(x) * (1 + weight): the weight is stored as an offset from one."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, 1.0 + self.weight.float(), self.eps)


class LinearAttention(nn.Module):
    """Qwen3.5's Gated DeltaNet mixer; forward advances its (state, conv window) over a chunk."""

    def __init__(self, c: HybridConfig) -> None:
        super().__init__()
        self.c = c
        D, HV = c.hidden_size, c.linear_num_value_heads
        self.in_proj_qkv = nn.Linear(D, c.conv_dim, bias=False)
        self.in_proj_z = nn.Linear(D, c.value_dim, bias=False)
        self.in_proj_b = nn.Linear(D, HV, bias=False)
        self.in_proj_a = nn.Linear(D, HV, bias=False)
        self.conv1d = nn.Conv1d(c.conv_dim, c.conv_dim, c.linear_conv_kernel_dim, groups=c.conv_dim, bias=False)
        self.dt_bias = nn.Parameter(torch.ones(HV))
        self.A_log = nn.Parameter(torch.zeros(HV))
        self.norm = RMSNorm(c.linear_value_head_dim, c.rms_norm_eps)
        self.out_proj = nn.Linear(c.value_dim, D, bias=False)

    def fused_rows(self, projection: str) -> dict[str, tuple[int, int]]:
        """Named row ranges of `in_proj_qkv`: q | k | v."""
        if projection != "in_proj_qkv":
            return {}
        c = self.c
        key_dim = c.linear_num_key_heads * c.linear_key_head_dim
        return named_rows([("q", key_dim), ("k", key_dim), ("v", c.linear_num_value_heads * c.linear_value_head_dim)])

    def forward(self, x: torch.Tensor, state: torch.Tensor, window: torch.Tensor, emit=None):
        """x: [B, T, hidden]; state: [B, Hv, K, V] fp32; window: [B, conv_dim, kernel - 1].
        Returns (out [B, T, hidden], new state, new window)."""
        c = self.c
        B, T = x.shape[:2]
        qkv, window = short_conv(self.in_proj_qkv(x), self.conv1d.weight, window=window, activation="silu")
        q, k, v = qkv.split([c.key_dim, c.key_dim, c.value_dim], dim=-1)
        q = l2_norm(q.view(B, T, c.linear_num_key_heads, c.linear_key_head_dim)).to(x.dtype)
        k = l2_norm(k.view(B, T, c.linear_num_key_heads, c.linear_key_head_dim)).to(x.dtype)
        v = v.view(B, T, c.linear_num_value_heads, c.linear_value_head_dim)
        g, beta = gdn_gate(self.in_proj_a(x), self.in_proj_b(x), self.A_log, self.dt_bias)
        if emit is not None:
            emit(k[0], q[0])
        o, state = gated_delta_rule(q, k, v, g, beta, initial_state=state, output_final_state=True)
        z = self.in_proj_z(x).view(B, T, c.linear_num_value_heads, c.linear_value_head_dim)
        o = gated_rms_norm(o, z, self.norm.weight, c.rms_norm_eps, activation="silu", norm_before_gate=True)
        return self.out_proj(o.reshape(B, T, c.value_dim)), state, window


class GatedAttention(nn.Module):
    """Qwen3.5's attention: per-head q/k norms, partial RoPE, grouped KV heads over a KV cache,
    output multiplied by sigmoid(gate) where the gate is the second half of each q_proj head."""

    def __init__(self, c: HybridConfig) -> None:
        super().__init__()
        self.c = c
        D, H, Hkv, hd = c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.q_proj = nn.Linear(D, 2 * H * hd, bias=c.attention_bias)
        self.k_proj = nn.Linear(D, Hkv * hd, bias=c.attention_bias)
        self.v_proj = nn.Linear(D, Hkv * hd, bias=c.attention_bias)
        self.o_proj = nn.Linear(H * hd, D, bias=c.attention_bias)
        self.q_norm = ZeroCenteredRMSNorm(hd, c.rms_norm_eps)
        self.k_norm = ZeroCenteredRMSNorm(hd, c.rms_norm_eps)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """x: [B, T, hidden]; cos, sin: [T, rotary_dim]; `cache` (batch B) gains the chunk."""
        c = self.c
        B, T, H, Hkv, hd = *x.shape[:2], c.num_attention_heads, c.num_key_value_heads, c.head_dim
        q, gate = self.q_proj(x).view(B, T, H, 2 * hd).chunk(2, dim=-1)
        q = apply_rotary(self.q_norm(q), cos, sin)
        k = apply_rotary(self.k_norm(self.k_proj(x).view(B, T, Hkv, hd)), cos, sin)
        keys, values = cache.append(k, self.v_proj(x).view(B, T, Hkv, hd))
        o = attention(q, keys, values, window=cache.window, mask=cache.attention_mask())
        cache.trim()
        return self.o_proj(o.reshape(B, T, H * hd) * torch.sigmoid(gate.reshape(B, T, H * hd)))


# The module tree below mirrors transformers' Qwen3_5ForCausalLM: attribute paths are the
# checkpoint's tensor names (the other architectures keep parallel trees for the same reason).
class DecoderLayer(Layer):
    """x += mixer(input_layernorm(x)); x += mlp(post_attention_layernorm(x)). The state is a
    RecurrentState for a GDN layer (`linear_attn`), a KV cache for an attention layer."""

    def __init__(self, c: HybridConfig, kind: str) -> None:
        super().__init__()
        self.kind = kind
        if kind == "linear_attention":
            self.linear_attn = LinearAttention(c)
        else:
            self.self_attn = GatedAttention(c)
        self.mlp = GatedMLP(c.hidden_size, c.intermediate_size)
        self.input_layernorm = ZeroCenteredRMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = ZeroCenteredRMSNorm(c.hidden_size, c.rms_norm_eps)

    def forward(self, x: torch.Tensor, state: RecurrentState | KVCache, ctx: LayerContext):
        h = self.input_layernorm(x)
        if self.kind == "linear_attention":
            out, recurrent, conv = self.linear_attn(h, state.recurrent, state.conv, ctx.emit)
            state = RecurrentState(recurrent, conv)
        else:
            out = self.self_attn(h, *ctx.rotary, state)
        x = x + out
        return x + self.mlp(self.post_attention_layernorm(x)), state

    def init_state(self, spec: StateSpec) -> RecurrentState | KVCache:
        """GDN: state [B, Hv, K, V] fp32 and raw conv window [B, conv_dim, kernel - 1];
        attention: an empty KV cache (keeping `spec.window - 1` tokens with a window)."""
        if self.kind == "linear_attention":
            c = self.linear_attn.c
            return RecurrentState(
                torch.zeros(spec.batch, c.linear_num_value_heads, c.linear_key_head_dim, c.linear_value_head_dim,
                            dtype=torch.float32, device=spec.device),
                torch.zeros(spec.batch, c.conv_dim, c.linear_conv_kernel_dim - 1, dtype=spec.dtype, device=spec.device))
        c = self.self_attn.c
        return KVCache.empty(spec.batch, c.num_key_value_heads, c.head_dim, spec.dtype, spec.device, spec.window)

    def channels(self, index: int) -> list[Channel]:
        """The key heads of a GDN layer; none for attention."""
        if self.kind != "linear_attention":
            return []
        c = self.linear_attn.c
        return [Channel(index, h, c.linear_key_head_dim) for h in range(c.linear_num_key_heads)]


class Trunk(nn.Module):
    def __init__(self, c: HybridConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(c, kind) for kind in c.layer_types)
        self.norm = ZeroCenteredRMSNorm(c.hidden_size, c.rms_norm_eps)


class Qwen35ForCausalLM(nn.Module):
    """Parameter tree of transformers' Qwen3_5ForCausalLM (same state_dict keys)."""

    def __init__(self, c: HybridConfig) -> None:
        super().__init__()
        self.config = c
        self.model = Trunk(c)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        if c.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def init_weights(self, seed: int) -> None:
        """transformers' Qwen3.5 initialisation (A in [0.01, 16], dt_bias = 1, zero-centred norms
        at 0, gated norm at 1, normal(0, 0.02) matrices), reproducible from `seed`."""
        random_init(self, seed, a_min=0.01, dt_bias=1.0, ones=(r"linear_attn\.norm\.weight$",),
                    zeros=(r"norm\.weight$",))


class HybridBackbone(LayerStackBackbone):
    """A Qwen3.5 language model (text) at batch size 1; `window` gives the attention layers a
    sliding window."""

    def __init__(self, model: Qwen35ForCausalLM, tokenizer: Tokenizer, name: str, prefill_chunk: int,
                 window: int | None = None) -> None:
        super().__init__(model, tokenizer, name, prefill_chunk, window)
        self.rope = self.config.rope().to(self.device)

    @property
    def layers(self) -> nn.ModuleList:
        return self.model.model.layers

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.model.embed_tokens(ids)

    def _final_norm(self, last: torch.Tensor) -> torch.Tensor:
        return self.model.model.norm(last)


def checkpoint_name(name: str) -> str:
    """Tensor names of the vision-language release onto the text model's tree."""
    return name.replace("model.language_model.", "model.", 1)


def read_checkpoint(directory: Path, overrides: dict, parse) -> Checkpoint:
    """The text config (the release's `text_config`, tied embeddings from the top level),
    updated by `overrides`; tensors of the vision-language release renamed onto the text tree."""
    raw = read_config(directory)
    text = dict(raw.get("text_config", raw))
    text.setdefault("tie_word_embeddings", raw.get("tie_word_embeddings", False))
    text.update(overrides)
    conf = parse(text, where=str(directory / "config.json"))
    return Checkpoint(conf, WeightFiles(directory), str(directory), checkpoint_name)


ARCHITECTURE = Architecture(parse=HybridConfig.from_dict, model=Qwen35ForCausalLM, backbone=HybridBackbone,
                            ignore=tuple(IGNORED_TENSORS), read=read_checkpoint, overrides=PRETRAINED_OVERRIDES,
                            chat_template=True)


def build(cfg: BackboneConfig) -> HybridBackbone:
    """A Qwen3.5 backbone from a checkpoint (`cfg.pretrained`; `cfg.model` may override only
    rope_parameters and max_position_embeddings, the YaRN switch) or random weights
    (`cfg.model`, Qwen3_5TextConfig field names). `cfg.window` gives the attention layers a
    sliding window."""
    return build_backbone(cfg, ARCHITECTURE)
