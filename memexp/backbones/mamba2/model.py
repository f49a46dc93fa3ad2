"""Mamba-2 (mamba_ssm's MambaLMHeadModel / transformers' Mamba2ForCausalLM) behind the
native memory interface.

Reads both checkpoint formats: mamba_ssm's (config.json with d_model / n_layer / ssm_cfg,
`backbone.embedding.weight`; state-spaces/mamba2-*, and nvidia/mamba2-8b-3t-4k once
converted by scripts/convert/mamba2_megatron.py) and transformers' (model_type 'mamba2',
`backbone.embeddings.weight`). Modules are named like transformers' so its tensors load by
name; mamba_ssm's differ only in the embedding.

Per block: x += mixer(norm(x)) (residual stream in fp32 when residual_in_fp32), where

    z, xBC, dt = in_proj x                                  [d_inner | d_inner + 2GN | H]
    xBC        = silu(short_conv(xBC) + conv bias)          carried raw window of d_conv - 1 inputs
    x, B, C    = xBC                                        [T, H, P], [T, G, N], [T, G, N] -> observer (B, C)
    y          = ssd(x, dt, A, B, C, D)                     state [H, P, N] fp32
    out        = out_proj(group_rms_norm(y * silu(z)))      norm per group of d_inner / G channels

Channels: one per (layer, B/C group), d_k = d_state; the observer sees keys = B and
queries = C, L2-normalised (B and C enter the SSD scan unnormalised; the observer gets
unit vectors for cosine routing). `scale_recurrent(lam)` scales the SSM states only (the
NoteBank paper's rescale before readout; lam = 0 is the clean start), leaving the conv
windows and the position counter as they are.

On CUDA the conv runs on causal-conv1d's kernels and the scan on mamba_ssm's
(`mamba_chunk_scan_combined` for chunks, `selective_state_update` for decode tokens), all
from the carried state (memexp.kernels.short_conv, memexp.kernels.ssd).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from memexp.backbones.base import Channel
from memexp.backbones.build import Architecture, Checkpoint, build_backbone
from memexp.backbones.loading import DECAY_GATES, BackboneLoadError, WeightFiles, read_config
from memexp.backbones.modules import RMSNorm, named_rows, random_init
from memexp.backbones.norms import gated_rms_norm
from memexp.backbones.stack import Layer, LayerContext, LayerStackBackbone, RecurrentState, StackState, StateSpec
from memexp.core.schema import BackboneConfig, ConfigError
from memexp.kernels.short_conv import short_conv
from memexp.kernels.ssd import ssd

HF_INERT_FIELDS = {  # transformers Mamba2Config fields that do not change inference results
    "model_type", "architectures", "transformers_version", "torch_dtype", "dtype", "use_cache", "pad_token_id",
    "hidden_act", "initializer_range", "time_step_rank", "time_step_min", "time_step_max", "time_step_floor",
    "rescale_prenorm_residual", "rms_norm", "output_hidden_states", "return_dict",
}
MEGATRON_EXTRA = [r"_extra_state$"]
FP32_PARAMETERS = (*DECAY_GATES, "D")  # mamba_ssm keeps the skip weight D in fp32 with the gates


@dataclass
class Mamba2Config:
    """The architecture, with the field names and defaults of transformers' Mamba2Config
    (except n_groups, whose mamba_ssm default of 1 is the 1.3B model's)."""

    hidden_size: int = 2048  # the residual stream's width
    num_hidden_layers: int = 48  # Mamba-2 blocks
    num_heads: int = 64  # SSM heads
    head_dim: int = 64  # channels per SSM head
    state_size: int = 128  # the SSM state's size N per group (B and C width)
    n_groups: int = 1  # B / C groups shared by the heads
    expand: int = 2  # inner width = hidden_size x expand
    conv_kernel: int = 4  # taps of the short causal conv on x, B, C
    use_bias: bool = False  # biases on in_proj and out_proj
    use_conv_bias: bool = True  # a bias on the short conv
    layer_norm_epsilon: float = 1e-5  # RMSNorm epsilon
    residual_in_fp32: bool = True  # keep the residual stream in fp32
    chunk_size: int = 256  # the SSD scan's chunk length
    time_step_limit: tuple = (0.0, math.inf)  # dt is clamped to this range
    vocab_size: int = 50288  # tokens in the embedding and the LM head
    tie_word_embeddings: bool = True  # the LM head shares the embedding matrix
    bos_token_id: int | None = 0  # the tokenizer's beginning-of-sequence id
    eos_token_id: int | None = 0  # the tokenizer's end-of-sequence id

    @classmethod
    def from_dict(cls, values: dict, strict: bool = False, where: str = "config.json") -> "Mamba2Config":
        """From a transformers or mamba_ssm config.json (unknown keys ignored), or from
        `backbone.model` in transformers' field names (strict: unknown keys are errors)."""
        if "d_model" in values:
            return cls.from_mamba_ssm(values, where)
        if values.get("model_type", "mamba2") != "mamba2":
            raise BackboneLoadError(f"{where}: model_type={values['model_type']!r} is not Mamba-2 ('mamba2'); "
                                    f"choose the matching backbone.arch")
        known = {f.name for f in fields(cls)}
        if strict:
            for key in values:
                if key not in known and key not in HF_INERT_FIELDS:
                    raise ConfigError(f"{where}.{key}: unknown field; allowed fields are {', '.join(sorted(known))}")
        conf = cls(**{k: v for k, v in values.items() if k in known})
        if values.get("rms_norm") is False:
            raise BackboneLoadError(f"{where}: rms_norm=false (ungated Mamba-2 output) is not supported")
        if isinstance(conf.eos_token_id, list):
            conf.eos_token_id = conf.eos_token_id[0]
        conf.time_step_limit = tuple(_json_float(t) for t in conf.time_step_limit)
        conf.check(where)
        return conf

    @classmethod
    def from_mamba_ssm(cls, values: dict, where: str) -> "Mamba2Config":
        """mamba_ssm's MambaConfig: d_model, n_layer, vocab_size padded to
        pad_vocab_size_multiple, the mixer's arguments in ssm_cfg."""
        ssm = dict(values.get("ssm_cfg") or {})
        if ssm.get("layer", "Mamba2") != "Mamba2":
            raise BackboneLoadError(f"{where}: ssm_cfg.layer={ssm['layer']!r}; memexp reads Mamba2 layers only")
        unsupported = {
            "d_intermediate": values.get("d_intermediate", 0) != 0,
            "attn_layer_idx": bool(values.get("attn_layer_idx")),
            "rms_norm": values.get("rms_norm", True) is not True,
            "ssm_cfg.d_ssm": ssm.get("d_ssm") is not None,
            "ssm_cfg.D_has_hdim": bool(ssm.get("D_has_hdim", False)),
            "ssm_cfg.rmsnorm": ssm.get("rmsnorm", True) is not True,
            "ssm_cfg.norm_before_gate": bool(ssm.get("norm_before_gate", False)),
        }
        bad = [k for k, v in unsupported.items() if v]
        if bad:
            raise BackboneLoadError(f"{where}: {', '.join(bad)} not supported by memexp's Mamba-2 (pure Mamba2 "
                                    f"mixers with gated RMSNorm, no MLP or attention layers)")
        d_model = values["d_model"]
        expand = ssm.get("expand", 2)
        head_dim = ssm.get("headdim", 64)
        multiple = values.get("pad_vocab_size_multiple", 8)
        vocab = values["vocab_size"]
        vocab += (-vocab) % multiple
        conf = cls(
            hidden_size=d_model,
            num_hidden_layers=values["n_layer"],
            num_heads=expand * d_model // head_dim,
            head_dim=head_dim,
            state_size=ssm.get("d_state", 128),
            n_groups=ssm.get("ngroups", 1),
            expand=expand,
            conv_kernel=ssm.get("d_conv", 4),
            use_bias=ssm.get("bias", False),
            use_conv_bias=ssm.get("conv_bias", True),
            layer_norm_epsilon=values.get("norm_epsilon", 1e-5),
            residual_in_fp32=values.get("residual_in_fp32", True),
            chunk_size=ssm.get("chunk_size", 256),
            time_step_limit=tuple(_json_float(t) for t in ssm.get("dt_limit", (0.0, math.inf))),
            vocab_size=vocab,
            tie_word_embeddings=values.get("tie_embeddings", True),
        )
        conf.check(where)
        return conf

    def check(self, where: str) -> None:
        if self.hidden_size * self.expand != self.num_heads * self.head_dim:
            raise ConfigError(f"{where}: hidden_size * expand ({self.hidden_size * self.expand}) must equal "
                              f"num_heads * head_dim ({self.num_heads * self.head_dim})")
        if self.num_heads % self.n_groups:
            raise ConfigError(f"{where}.n_groups={self.n_groups}: must divide num_heads={self.num_heads}")

    @property
    def d_inner(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def conv_dim(self) -> int:
        return self.d_inner + 2 * self.n_groups * self.state_size


def _json_float(value) -> float:
    """A float from config.json, where transformers writes infinity as {"__float__": "Infinity"}."""
    if isinstance(value, dict):
        value = value.get("__float__")
    return float(value)


class Mamba2Mixer(nn.Module):
    """One Mamba-2 mixer; forward advances its (SSM state, conv window) over a chunk."""

    def __init__(self, c: Mamba2Config) -> None:
        super().__init__()
        self.c = c
        self.in_proj = nn.Linear(c.hidden_size, c.d_inner + c.conv_dim + c.num_heads, bias=c.use_bias)
        self.conv1d = nn.Conv1d(c.conv_dim, c.conv_dim, c.conv_kernel, groups=c.conv_dim, bias=c.use_conv_bias)
        self.dt_bias = nn.Parameter(torch.empty(c.num_heads))
        self.A_log = nn.Parameter(torch.empty(c.num_heads))
        self.D = nn.Parameter(torch.empty(c.num_heads))
        self.norm = RMSNorm(c.d_inner, c.layer_norm_epsilon)
        self.out_proj = nn.Linear(c.d_inner, c.hidden_size, bias=c.use_bias)

    def fused_rows(self, projection: str) -> dict[str, tuple[int, int]]:
        """Named row ranges of `in_proj`: z | x | B | C | dt, and xBC (the conv's inputs)."""
        if projection != "in_proj":
            return {}
        c, gn = self.c, self.c.n_groups * self.c.state_size
        return named_rows([("z", c.d_inner), ("x", c.d_inner), ("B", gn), ("C", gn), ("dt", c.num_heads)],
                          xBC=("x", "C"))

    def forward(
        self,
        x: torch.Tensor,
        ssm_state: torch.Tensor,
        window: torch.Tensor,
        emit=None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x: [Bt, T, hidden]; ssm_state: [Bt, H, P, N] fp32; window: [Bt, conv_dim, d_conv - 1].
        `emit(keys, queries)` receives B and C of the first sequence as [T, G, N], L2-normalised.
        Returns (out [Bt, T, hidden], new SSM state, new window)."""
        c = self.c
        Bt, T = x.shape[:2]
        z, xBC, dt = self.in_proj(x).split([c.d_inner, c.conv_dim, c.num_heads], dim=-1)
        xBC, window = short_conv(xBC, self.conv1d.weight, self.conv1d.bias, window=window, activation="silu")
        xs, B, C = xBC.split([c.d_inner, c.n_groups * c.state_size, c.n_groups * c.state_size], dim=-1)
        B = B.view(Bt, T, c.n_groups, c.state_size)
        C = C.view(Bt, T, c.n_groups, c.state_size)
        if emit is not None:
            emit(F.normalize(B[0].float(), dim=-1).to(x.dtype), F.normalize(C[0].float(), dim=-1).to(x.dtype))
        y, ssm_state = ssd(
            xs.view(Bt, T, c.num_heads, c.head_dim),
            dt,
            -torch.exp(self.A_log.float()),
            B,
            C,
            D=self.D,
            dt_bias=self.dt_bias,
            dt_softplus=True,
            dt_limit=c.time_step_limit,
            initial_state=ssm_state,
            chunk_size=c.chunk_size,
        )
        y = gated_rms_norm(
            y.reshape(Bt, T, c.d_inner),
            z,
            self.norm.weight,
            c.layer_norm_epsilon,
            activation="silu",
            norm_before_gate=False,
            group_size=c.d_inner // c.n_groups,
        )
        return self.out_proj(y), ssm_state, window


# The module tree below mirrors transformers' Mamba2ForCausalLM: attribute paths are the
# checkpoint's tensor names (the other architectures keep parallel trees for the same reason).
class Mamba2Block(Layer):
    """x += mixer(norm(x)), the residual stream in x's dtype (fp32 with residual_in_fp32) and
    the mixer in the compute dtype; state: SSM state + conv window."""

    def __init__(self, c: Mamba2Config) -> None:
        super().__init__()
        self.norm = RMSNorm(c.hidden_size, c.layer_norm_epsilon)
        self.mixer = Mamba2Mixer(c)

    def forward(self, x: torch.Tensor, state: RecurrentState, ctx: LayerContext):
        h = self.norm(x).to(self.mixer.in_proj.weight.dtype)
        out, ssm, conv = self.mixer(h, state.recurrent, state.conv, ctx.emit)
        return x + out.to(x.dtype), RecurrentState(ssm, conv)

    def init_state(self, spec: StateSpec) -> RecurrentState:
        """SSM state [B, H, P, N] fp32; raw conv window [B, conv_dim, d_conv - 1] (the last xBC inputs)."""
        c = self.mixer.c
        return RecurrentState(
            torch.zeros(spec.batch, c.num_heads, c.head_dim, c.state_size, dtype=torch.float32, device=spec.device),
            torch.zeros(spec.batch, c.conv_dim, c.conv_kernel - 1, dtype=spec.dtype, device=spec.device))

    def channels(self, index: int) -> list[Channel]:
        c = self.mixer.c
        return [Channel(index, g, c.state_size) for g in range(c.n_groups)]


class Mamba2Trunk(nn.Module):
    def __init__(self, c: Mamba2Config) -> None:
        super().__init__()
        self.embeddings = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(Mamba2Block(c) for _ in range(c.num_hidden_layers))
        self.norm_f = RMSNorm(c.hidden_size, c.layer_norm_epsilon)


class Mamba2ForCausalLM(nn.Module):
    """Parameter tree of transformers' Mamba2ForCausalLM (same state_dict keys)."""

    def __init__(self, c: Mamba2Config) -> None:
        super().__init__()
        self.config = c
        self.backbone = Mamba2Trunk(c)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        if c.tie_word_embeddings:
            self.lm_head.weight = self.backbone.embeddings.weight

    def init_weights(self, seed: int) -> None:
        """mamba_ssm's initialisation (A in [1, 16], dt in [1e-3, 0.1], D = 1), reproducible
        from `seed` whatever the global RNG holds."""
        random_init(self, seed, a_min=1.0, ones=(r"\.D$", r"norm\.weight$", r"norm_f\.weight$"))


class Mamba2State(StackState):
    """Per layer a RecurrentState: the fp32 SSM state [1, H, P, N] and the raw conv window."""

    @property
    def ssm(self) -> list[torch.Tensor | None]:
        """The SSM states by layer (Mamba-2's name for the recurrent memory)."""
        return self.recurrent


class Mamba2Backbone(LayerStackBackbone):
    """A Mamba-2 language model at batch size 1."""

    state_class = Mamba2State

    @property
    def layers(self) -> nn.ModuleList:
        return self.model.backbone.layers

    @property
    def residual_dtype(self) -> torch.dtype:
        return torch.float32 if self.config.residual_in_fp32 else self.dtype

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.backbone.embeddings(ids).to(self.residual_dtype)

    def _final_norm(self, last: torch.Tensor) -> torch.Tensor:
        return self.model.backbone.norm_f(last).to(self.dtype)


def read_checkpoint(directory: Path, overrides: dict, parse) -> Checkpoint:
    """transformers' format, or mamba_ssm's (config.json with d_model), whose embedding is
    `backbone.embedding`."""
    raw = read_config(directory)
    rename = (lambda n: n.replace("backbone.embedding.", "backbone.embeddings.")) if "d_model" in raw else None
    return Checkpoint(parse(raw, where=str(directory / "config.json")), WeightFiles(directory), str(directory), rename)


ARCHITECTURE = Architecture(parse=Mamba2Config.from_dict, model=Mamba2ForCausalLM, backbone=Mamba2Backbone,
                            keep_fp32=FP32_PARAMETERS, ignore=tuple(MEGATRON_EXTRA), read=read_checkpoint)


def build(cfg: BackboneConfig) -> Mamba2Backbone:
    """A Mamba-2 backbone from a checkpoint (`cfg.pretrained`, either format) or random
    weights (`cfg.model`, transformers' field names)."""
    return build_backbone(cfg, ARCHITECTURE)
