"""Gated DeltaNet (FLA's GatedDeltaNetForCausalLM) behind the native memory interface.

Modules are named like FLA's so FLA checkpoints load by tensor name, and `save_pretrained`
writes the same format (config.json with FLA's field names + model.safetensors + tokenizer),
so memexp's own GDN checkpoints (tiny_gdn) are read by the same path.

Per block: x += attn(attn_norm(x)); x += mlp(mlp_norm(x)), where attn is

    q, k, v = silu(short_conv(q_proj x, k_proj x, v_proj x))     per-channel causal conv
    q, k    = l2_norm(q), l2_norm(k)                               [T, H, K]  -> observer
    g, beta = -exp(A_log) softplus(a_proj x + dt_bias), sigmoid(b_proj x)
    o       = gated_delta_rule(q, k, v, g, beta)                   [T, HV, V]
    out     = o_proj(rms_norm(o) * o_norm.weight * swish(g_proj x))
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from memexp.backbones.base import Channel
from memexp.backbones.build import Architecture, build_backbone
from memexp.backbones.gdn_gate import gdn_gate
from memexp.backbones.loading import BackboneLoadError, save_weights
from memexp.backbones.modules import GatedMLP, RMSNorm, ShortConv, fla_mlp_width, random_init
from memexp.backbones.norms import gated_rms_norm
from memexp.backbones.stack import Layer, LayerContext, LayerStackBackbone, RecurrentState, StateSpec
from memexp.core.schema import BackboneConfig, ConfigError
from memexp.kernels.gated_delta_rule import gated_delta_rule
from memexp.kernels.l2norm import l2_norm
from memexp.kernels.short_conv import short_conv

LEGACY_TENSORS = [r"^model\.layers\.\d+\.attn\.D$"]  # unused `D` of FLA GDN checkpoints before Dec 2024
FLA_INERT_FIELDS = {  # FLA config fields that do not change inference results
    "model_type", "architectures", "transformers_version", "torch_dtype", "dtype", "attn_mode",
    "max_position_embeddings", "use_cache", "pad_token_id", "fuse_norm", "fuse_swiglu", "fuse_cross_entropy",
    "fuse_linear_cross_entropy", "use_l2warp",
}


@dataclass
class GDNConfig:
    """The architecture, with the field names and defaults of FLA's GatedDeltaNetConfig."""

    hidden_size: int = 2048  # the residual stream's width
    num_hidden_layers: int = 21  # GDN blocks
    num_heads: int = 6  # query / key heads
    head_dim: int = 256  # key (and query) dimension per head
    expand_v: float = 2.0  # value dimension per head = head_dim x expand_v
    num_v_heads: int | None = None  # value heads (a multiple of num_heads); null = num_heads
    use_gate: bool = True  # the output gate g_proj (gated RMSNorm before o_proj)
    use_short_conv: bool = True  # short causal convs on q, k and v
    conv_size: int = 4  # taps of each short conv
    allow_neg_eigval: bool = False  # beta in (0, 2) instead of (0, 1): the state update may have negative eigenvalues
    # MLP width = FLA's rounding of hidden_size x hidden_ratio when intermediate_size is null
    hidden_ratio: int | None = 4
    intermediate_size: int | None = None  # the MLP's width; null = from hidden_ratio
    hidden_act: str = "swish"  # the MLP's activation
    norm_eps: float = 1e-6  # RMSNorm epsilon
    vocab_size: int = 32000  # tokens in the embedding and the LM head
    tie_word_embeddings: bool = False  # the LM head shares the embedding matrix
    initializer_range: float = 0.02  # std of FLA's normal init of random weights
    bos_token_id: int | None = 1  # the tokenizer's beginning-of-sequence id
    eos_token_id: int | None = 2  # the tokenizer's end-of-sequence id
    output_gate_activation: str = "swish"  # the output gate's activation in the gated RMSNorm
    attn: dict | None = None  # FLA's hybrid-attention spec; memexp's GDN is pure
    attnres_block_size: int | None = None  # FLA's attention-residual blocks: refused when set (memexp's GDN has none)

    @classmethod
    def from_dict(cls, values: dict, strict: bool = False, where: str = "config.json") -> "GDNConfig":
        """From an FLA config.json (unknown keys ignored) or `backbone.model` (strict: an
        unknown key is an error naming it)."""
        known = {f.name for f in fields(cls)}
        if strict:
            for key in values:
                if key not in known and key not in FLA_INERT_FIELDS:
                    raise ConfigError(f"{where}.{key}: unknown field; allowed fields are {', '.join(sorted(known))}")
        if values.get("model_type", "gated_deltanet") != "gated_deltanet":
            raise BackboneLoadError(f"{where}: model_type={values['model_type']!r} is not a Gated DeltaNet "
                                    f"('gated_deltanet'); choose the matching backbone.arch")
        conf = cls(**{k: v for k, v in values.items() if k in known})
        conf.check(where)
        return conf

    def check(self, where: str) -> None:
        if self.attn is not None:
            raise BackboneLoadError(f"{where}: attn={self.attn!r} (hybrid attention layers) is not supported by "
                                    f"memexp's GDN backbone")
        if self.attnres_block_size is not None:
            raise BackboneLoadError(f"{where}: attnres_block_size is not supported by memexp's GDN backbone")
        if self.hidden_act != "swish":
            raise BackboneLoadError(f"{where}: hidden_act={self.hidden_act!r}; only 'swish' is supported")
        if self.output_gate_activation not in ("swish", "silu", "sigmoid"):
            raise ConfigError(f"{where}.output_gate_activation={self.output_gate_activation!r}: allowed values are "
                              f"swish, silu, sigmoid")
        if self.v_heads % self.num_heads:
            raise ConfigError(f"{where}.num_v_heads={self.num_v_heads}: must be a multiple of num_heads={self.num_heads}")
        if not math.isclose(self.head_dim * self.expand_v, self.head_v_dim):
            raise ConfigError(f"{where}.expand_v={self.expand_v}: head_dim * expand_v must be an integer")

    @property
    def v_heads(self) -> int:
        return self.num_v_heads or self.num_heads

    @property
    def head_v_dim(self) -> int:
        return int(self.head_dim * self.expand_v)

    @property
    def key_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def value_dim(self) -> int:
        return self.v_heads * self.head_v_dim

    @property
    def mlp_dim(self) -> int:
        return self.intermediate_size or fla_mlp_width(self.hidden_size, self.hidden_ratio)

    def to_fla_dict(self) -> dict:
        """config.json in FLA's format (readable by fla's GatedDeltaNetConfig)."""
        out = asdict(self)
        out["intermediate_size"] = self.mlp_dim
        return {"model_type": "gated_deltanet", "architectures": ["GatedDeltaNetForCausalLM"], **out}


class GatedDeltaNet(nn.Module):
    """One GDN token mixer; forward advances its (recurrent state, conv window) over a chunk."""

    def __init__(self, c: GDNConfig) -> None:
        super().__init__()
        self.c = c
        D, HV = c.hidden_size, c.v_heads
        self.q_proj = nn.Linear(D, c.key_dim, bias=False)
        self.k_proj = nn.Linear(D, c.key_dim, bias=False)
        self.v_proj = nn.Linear(D, c.value_dim, bias=False)
        self.a_proj = nn.Linear(D, HV, bias=False)
        self.b_proj = nn.Linear(D, HV, bias=False)
        self.A_log = nn.Parameter(torch.empty(HV))
        self.dt_bias = nn.Parameter(torch.empty(HV))
        if c.use_short_conv:
            self.q_conv1d = ShortConv(c.key_dim, c.conv_size)
            self.k_conv1d = ShortConv(c.key_dim, c.conv_size)
            self.v_conv1d = ShortConv(c.value_dim, c.conv_size)
        if c.use_gate:
            self.g_proj = nn.Linear(D, c.value_dim, bias=False)
        self.o_norm = RMSNorm(c.head_v_dim, c.norm_eps)
        self.o_proj = nn.Linear(c.value_dim, D, bias=False)
        self.form = "auto"  # reference form of the recurrence: auto | chunk | recurrent (benchmarks)

    def forward(
        self,
        x: torch.Tensor,
        state: torch.Tensor | None,
        window: torch.Tensor | None,
        emit=None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """x: [B, T, hidden]; state: [B, HV, K, V] fp32 or None (zeros); window: [B, 2*key_dim
        + value_dim, conv_size - 1] or None (zeros). `emit(keys, queries)` receives the
        normalised [T, H, K] features of the first sequence (the backbone runs batch 1).
        Returns (out [B, T, hidden], new state, new window)."""
        c = self.c
        B, T = x.shape[:2]
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        if c.use_short_conv:
            weight = torch.cat([self.q_conv1d.weight, self.k_conv1d.weight, self.v_conv1d.weight], dim=0)
            qkv, window = short_conv(torch.cat([q, k, v], dim=-1), weight, window=window, activation="silu")
            q, k, v = qkv.split([c.key_dim, c.key_dim, c.value_dim], dim=-1)
        else:
            q, k, v = F.silu(q), F.silu(k), F.silu(v)
        q = l2_norm(q.view(B, T, c.num_heads, c.head_dim)).to(x.dtype)
        k = l2_norm(k.view(B, T, c.num_heads, c.head_dim)).to(x.dtype)
        v = v.view(B, T, c.v_heads, c.head_v_dim)
        g, beta = gdn_gate(self.a_proj(x), self.b_proj(x), self.A_log, self.dt_bias, c.allow_neg_eigval)
        if emit is not None:
            emit(k[0], q[0])
        o, state = gated_delta_rule(q, k, v, g, beta, initial_state=state, output_final_state=True, form=self.form)
        if c.use_gate:
            gate = self.g_proj(x).view(B, T, c.v_heads, c.head_v_dim)
            o = gated_rms_norm(o, gate, self.o_norm.weight, c.norm_eps, activation=c.output_gate_activation)
        else:
            o = self.o_norm(o)
        return self.o_proj(o.reshape(B, T, c.value_dim)), state, window


# The module tree below (Block, Trunk, GDNForCausalLM and their attribute names) mirrors FLA's
# GatedDeltaNetForCausalLM because attribute paths are the checkpoint's tensor names; the other
# architectures keep parallel trees for the same reason.
class Block(Layer):
    """Pre-norm residual block: x += attn(attn_norm(x)); x += mlp(mlp_norm(x))."""

    def __init__(self, c: GDNConfig) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(c.hidden_size, c.norm_eps)
        self.attn = GatedDeltaNet(c)
        self.mlp_norm = RMSNorm(c.hidden_size, c.norm_eps)
        self.mlp = GatedMLP(c.hidden_size, c.mlp_dim)

    def forward(self, x: torch.Tensor, state: RecurrentState, ctx: LayerContext):
        out, recurrent, conv = self.attn(self.attn_norm(x), state.recurrent, state.conv, ctx.emit)
        x = x + out
        return x + self.mlp(self.mlp_norm(x)), RecurrentState(recurrent, conv)

    def init_state(self, spec: StateSpec) -> RecurrentState:
        """Recurrent state [B, HV, K, V] fp32; conv window [B, 2*key_dim + value_dim, conv_size - 1]."""
        c = self.attn.c
        recurrent = torch.zeros(spec.batch, c.v_heads, c.head_dim, c.head_v_dim, dtype=torch.float32,
                                device=spec.device)
        conv = torch.zeros(spec.batch, 2 * c.key_dim + c.value_dim, c.conv_size - 1, dtype=spec.dtype,
                           device=spec.device) if c.use_short_conv else None
        return RecurrentState(recurrent, conv)

    def channels(self, index: int) -> list[Channel]:
        c = self.attn.c
        return [Channel(index, h, c.head_dim) for h in range(c.num_heads)]


class Trunk(nn.Module):
    def __init__(self, c: GDNConfig) -> None:
        super().__init__()
        self.embeddings = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(Block(c) for _ in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.norm_eps)


class GDNForCausalLM(nn.Module):
    """Parameter tree of FLA's GatedDeltaNetForCausalLM (same state_dict keys)."""

    def __init__(self, c: GDNConfig) -> None:
        super().__init__()
        self.config = c
        self.model = Trunk(c)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        self.tie_weights()

    def tie_weights(self) -> None:
        """Share the embedding with the LM head when the config ties them (again after any
        move that re-creates parameters)."""
        if self.config.tie_word_embeddings:
            self.lm_head.weight = self.model.embeddings.weight

    def init_weights(self, seed: int) -> None:
        """FLA's initialisation (A in [0, 16], dt in [1e-3, 0.1], normal(0, initializer_range))."""
        random_init(self, seed, std=self.config.initializer_range, a_min=0.0)


class GDNBackbone(LayerStackBackbone):
    """A Gated DeltaNet language model at batch size 1."""

    @property
    def layers(self) -> nn.ModuleList:
        return self.model.model.layers

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.model.embeddings(ids)

    def _final_norm(self, last: torch.Tensor) -> torch.Tensor:
        return self.model.model.norm(last)

    def save_pretrained(self, directory: str | Path) -> None:
        """FLA-format checkpoint: config.json, model.safetensors and the tokenizer files."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        config = self.config.to_fla_dict()
        config["bos_token_id"], config["eos_token_id"] = self.tokenizer.bos_id, self.tokenizer.eos_id
        (directory / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        save_weights(self.model, directory)
        if not hasattr(self.tokenizer, "save"):
            raise TypeError(f"{type(self.tokenizer).__name__} cannot be saved beside the weights")
        self.tokenizer.save(directory)


ARCHITECTURE = Architecture(parse=GDNConfig.from_dict, model=GDNForCausalLM, backbone=GDNBackbone,
                            ignore=tuple(LEGACY_TENSORS))


def build(cfg: BackboneConfig) -> GDNBackbone:
    """A GDN backbone from a checkpoint (`cfg.pretrained`) or random weights (`cfg.model`)."""
    return build_backbone(cfg, ARCHITECTURE)
