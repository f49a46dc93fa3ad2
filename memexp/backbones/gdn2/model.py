"""Gated DeltaNet-2 (NVlabs' LitGPT `gdn2_1.3B`: LLM-OS-Models2/gdn2-1.3b-paper-matched) behind
the native memory interface.

Reads the LitGPT checkpoint as released (a .pth holding the state dict, possibly under
'model' with training-wrapper prefixes; the architecture is inferred from tensor shapes)
and the directory scripts/convert/gdn2_litgpt.py writes from it (config.json +
model.safetensors + tokenizer). Modules are named like LitGPT's GPT so its tensors load by
name.

Per block: x += attn(norm_1(x)); x += mlp.swiglu(norm_2(x)), where attn is

    q, k, v = silu(short_conv(q_proj x, k_proj x, v_proj x))         per-channel causal conv
    q, k    = l2_norm(q), l2_norm(k)                                   [T, H, K] -> observer
    g       = -exp(A_log)[head] * softplus(f_proj x + dt_bias)         per-channel decay [T, H, K]
    b, w    = sigmoid(b_proj x) [T, H, K], sigmoid(w_proj x) [T, H, V] erase and write gates
    o       = gdn2_rule(q, k, v, g, b, w)
    out     = o_proj(rms_norm(o) * o_norm.weight * act(g_proj x))

The output gate: NVlabs' layer (the code the checkpoint was trained with) uses
FusedRMSNormSwishGate, act = swish; FLA's port of the layer uses a sigmoid gate.
`output_gate_activation` defaults to swish; tests/backbones/test_gdn2.py settles the
choice on the released checkpoint by language-model loss when it is available.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from memexp.backbones.base import Channel
from memexp.backbones.build import Architecture, Checkpoint, build_backbone
from memexp.backbones.loading import TOKENIZER_FILES, BackboneLoadError, WeightFiles, read_config, save_weights
from memexp.backbones.modules import GatedMLP, RMSNorm, ShortConv, random_init
from memexp.backbones.norms import gated_rms_norm
from memexp.backbones.stack import Layer, LayerContext, LayerStackBackbone, RecurrentState, StateSpec
from memexp.core.schema import BackboneConfig, ConfigError
from memexp.kernels.gdn2_rule import gdn2_rule
from memexp.kernels.l2norm import l2_norm
from memexp.kernels.short_conv import short_conv

LITGPT_CHECKPOINT = "model-100b.pth"  # the file the paper evaluates in the released repo
WRAPPER_PREFIXES = ("_forward_module.", "module.", "_orig_mod.")
MODEL_TYPE = "gdn2_litgpt"


@dataclass
class GDN2Config:
    """The architecture of LitGPT's pure GDN-2 models (gdn2_per_layer=1) and the
    GatedDeltaNet2 layer defaults NVlabs' Block constructs it with."""

    hidden_size: int = 2304  # the residual stream's width
    num_hidden_layers: int = 18  # GDN-2 blocks
    num_heads: int = 16  # query / key heads
    head_dim: int = 128  # key (and query) dimension per head
    expand_v: float = 1.0  # value dimension per head = head_dim x expand_v
    num_v_heads: int | None = None  # value heads; null = num_heads
    conv_size: int = 4  # taps of each short conv
    allow_neg_eigval: bool = False  # beta in (0, 2) instead of (0, 1): the state update may have negative eigenvalues
    intermediate_size: int = 6208  # the SwiGLU MLP's width
    norm_eps: float = 1e-5  # epsilon of the output norm inside the GDN-2 layer
    layer_norm_eps: float = 1e-5  # epsilon of the blocks' pre-norms and the final norm
    vocab_size: int = 32000  # tokens in the embedding and the LM head
    tie_word_embeddings: bool = False  # the LM head shares the embedding matrix
    output_gate_activation: str = "swish"  # swish (NVlabs' code) | sigmoid (FLA's port)
    bos_token_id: int | None = 1  # the tokenizer's beginning-of-sequence id
    eos_token_id: int | None = 2  # the tokenizer's end-of-sequence id

    @classmethod
    def from_dict(cls, values: dict, strict: bool = False, where: str = "config.json") -> "GDN2Config":
        known = {f.name for f in fields(cls)}
        if strict:
            for key in values:
                if key not in known and key not in ("model_type", "architectures"):
                    raise ConfigError(f"{where}.{key}: unknown field; allowed fields are {', '.join(sorted(known))}")
        if values.get("model_type", MODEL_TYPE) != MODEL_TYPE:
            raise BackboneLoadError(f"{where}: model_type={values['model_type']!r} is not a LitGPT GDN-2 model "
                                    f"({MODEL_TYPE!r}); choose the matching backbone.arch")
        conf = cls(**{k: v for k, v in values.items() if k in known})
        conf.check(where)
        return conf

    @classmethod
    def from_state_dict(cls, sd: dict, where: str) -> "GDN2Config":
        """The architecture implied by a LitGPT state dict's tensor shapes."""
        try:
            vocab, hidden = sd["transformer.wte.weight"].shape
            layers = 1 + max(int(m.group(1)) for k in sd if (m := re.match(r"transformer\.h\.(\d+)\.", k)))
            heads = sd["transformer.h.0.attn.A_log"].shape[0]
            key_dim = sd["transformer.h.0.attn.q_proj.weight"].shape[0]
            value_dim = sd["transformer.h.0.attn.v_proj.weight"].shape[0]
            head_v_dim = sd["transformer.h.0.attn.f_proj.0.weight"].shape[0]
            conf = cls(
                hidden_size=hidden,
                num_hidden_layers=layers,
                num_heads=heads,
                head_dim=key_dim // heads,
                expand_v=head_v_dim / (key_dim // heads),
                num_v_heads=value_dim // head_v_dim,
                conv_size=sd["transformer.h.0.attn.q_conv1d.weight"].shape[-1],
                intermediate_size=sd["transformer.h.0.mlp.swiglu.w1.weight"].shape[0],
                vocab_size=vocab,
            )
        except (KeyError, ValueError) as e:
            raise BackboneLoadError(f"{where}: not a LitGPT GDN-2 state dict ({type(e).__name__}: {e}); "
                                    f"expected transformer.wte / transformer.h.<i>.attn.* tensors") from None
        conf.check(where)
        return conf

    def check(self, where: str) -> None:
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
        return int(round(self.head_dim * self.expand_v))

    @property
    def key_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def value_dim(self) -> int:
        return self.v_heads * self.head_v_dim

    def to_dict(self) -> dict:
        return {"model_type": MODEL_TYPE, **asdict(self)}


class GatedDeltaNet2(nn.Module):
    """One GDN-2 token mixer; forward advances its (recurrent state, conv window) over a chunk."""

    def __init__(self, c: GDN2Config) -> None:
        super().__init__()
        self.c = c
        D = c.hidden_size
        self.q_proj = nn.Linear(D, c.key_dim, bias=False)
        self.k_proj = nn.Linear(D, c.key_dim, bias=False)
        self.v_proj = nn.Linear(D, c.value_dim, bias=False)
        self.q_conv1d = ShortConv(c.key_dim, c.conv_size)
        self.k_conv1d = ShortConv(c.key_dim, c.conv_size)
        self.v_conv1d = ShortConv(c.value_dim, c.conv_size)
        self.f_proj = nn.Sequential(nn.Linear(D, c.head_v_dim, bias=False), nn.Linear(c.head_v_dim, c.key_dim, bias=False))
        self.b_proj = nn.Linear(D, c.key_dim, bias=False)
        self.w_proj = nn.Linear(D, c.value_dim, bias=False)
        self.A_log = nn.Parameter(torch.empty(c.num_heads))
        self.dt_bias = nn.Parameter(torch.empty(c.key_dim))
        self.g_proj = nn.Sequential(nn.Linear(D, c.head_v_dim, bias=False), nn.Linear(c.head_v_dim, c.value_dim, bias=True))
        self.o_norm = RMSNorm(c.head_v_dim, c.norm_eps)
        self.o_proj = nn.Linear(c.value_dim, D, bias=False)

    def forward(self, x: torch.Tensor, state: torch.Tensor, window: torch.Tensor, emit=None):
        """x: [B, T, hidden]; state: [B, HV, K, V] fp32; window: [B, 2*key_dim + value_dim,
        conv_size - 1]. `emit(keys, queries)` receives the normalised [T, H, K] features of
        the first sequence. Returns (out [B, T, hidden], new state, new window)."""
        c = self.c
        B, T, H, K, HV, V = *x.shape[:2], c.num_heads, c.head_dim, c.v_heads, c.head_v_dim
        weight = torch.cat([self.q_conv1d.weight, self.k_conv1d.weight, self.v_conv1d.weight], dim=0)
        qkv, window = short_conv(torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], dim=-1), weight,
                                 window=window, activation="silu")
        q, k, v = qkv.split([c.key_dim, c.key_dim, c.value_dim], dim=-1)
        q = l2_norm(q.view(B, T, H, K)).to(x.dtype)
        k = l2_norm(k.view(B, T, H, K)).to(x.dtype)
        v = v.view(B, T, HV, V)
        decay = -self.A_log.float().exp()[:, None] * F.softplus(self.f_proj(x).float() + self.dt_bias.float()).view(B, T, H, K)
        erase = torch.sigmoid(self.b_proj(x)).view(B, T, H, K)
        write = torch.sigmoid(self.w_proj(x)).view(B, T, HV, V)
        if c.allow_neg_eigval:
            erase = erase * 2
        if emit is not None:
            emit(k[0], q[0])
        if HV != H:
            q, k, decay, erase = (t.repeat_interleave(HV // H, dim=2) for t in (q, k, decay, erase))
        o, state = gdn2_rule(q, k, v, decay, erase, write, initial_state=state)
        gate = self.g_proj(x).view(B, T, HV, V)
        o = gated_rms_norm(o, gate, self.o_norm.weight, c.norm_eps, activation=c.output_gate_activation)
        return self.o_proj(o.reshape(B, T, c.value_dim)), state, window


class LLaMAMLP(nn.Module):
    """LitGPT's MLP: the gated MLP under `swiglu` with xformers' names (w1 gate, w2 up, w3 down)."""

    def __init__(self, c: GDN2Config) -> None:
        super().__init__()
        self.swiglu = GatedMLP(c.hidden_size, c.intermediate_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.swiglu(x)


def litgpt_to_module_name(name: str) -> str:
    """LitGPT's xformers SwiGLU names onto memexp's GatedMLP."""
    return name.replace(".swiglu.w1.", ".swiglu.gate_proj.").replace(".swiglu.w2.", ".swiglu.up_proj.") \
        .replace(".swiglu.w3.", ".swiglu.down_proj.")


# The module tree below mirrors LitGPT's GPT: attribute paths are the checkpoint's tensor names
# (the other architectures keep parallel trees for the same reason).
class Block(Layer):
    """x += attn(norm_1(x)); x += mlp(norm_2(x)); state: recurrent memory + conv window."""

    def __init__(self, c: GDN2Config) -> None:
        super().__init__()
        self.norm_1 = RMSNorm(c.hidden_size, c.layer_norm_eps)
        self.attn = GatedDeltaNet2(c)
        self.norm_2 = RMSNorm(c.hidden_size, c.layer_norm_eps)
        self.mlp = LLaMAMLP(c)

    def forward(self, x: torch.Tensor, state: RecurrentState, ctx: LayerContext):
        out, recurrent, conv = self.attn(self.norm_1(x), state.recurrent, state.conv, ctx.emit)
        x = x + out
        return x + self.mlp(self.norm_2(x)), RecurrentState(recurrent, conv)

    def init_state(self, spec: StateSpec) -> RecurrentState:
        """Recurrent state [B, HV, K, V] fp32; raw conv window [B, 2*key_dim + value_dim, conv_size - 1]."""
        c = self.attn.c
        return RecurrentState(
            torch.zeros(spec.batch, c.v_heads, c.head_dim, c.head_v_dim, dtype=torch.float32, device=spec.device),
            torch.zeros(spec.batch, 2 * c.key_dim + c.value_dim, c.conv_size - 1, dtype=spec.dtype, device=spec.device))

    def channels(self, index: int) -> list[Channel]:
        c = self.attn.c
        return [Channel(index, h, c.head_dim) for h in range(c.num_heads)]


class Trunk(nn.Module):
    def __init__(self, c: GDN2Config) -> None:
        super().__init__()
        self.wte = nn.Embedding(c.vocab_size, c.hidden_size)
        self.h = nn.ModuleList(Block(c) for _ in range(c.num_hidden_layers))
        self.ln_f = RMSNorm(c.hidden_size, c.layer_norm_eps)


class GDN2ForCausalLM(nn.Module):
    """Parameter tree of LitGPT's GPT with GDN-2 blocks (same names but for the MLP's)."""

    def __init__(self, c: GDN2Config) -> None:
        super().__init__()
        self.config = c
        self.transformer = Trunk(c)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        if c.tie_word_embeddings:
            self.lm_head.weight = self.transformer.wte.weight

    def init_weights(self, seed: int) -> None:
        """NVlabs' layer initialisation (A in [1, 16], per-channel dt in [1e-3, 0.1]),
        normal(0, 0.02) matrices, unit norms, zero biases, reproducible from `seed`."""
        random_init(self, seed, a_min=1.0, ones=(r"norm\.weight$", r"(norm_\d|ln_f)\.weight$"))


class GDN2Backbone(LayerStackBackbone):
    """A GDN-2 language model at batch size 1."""

    @property
    def layers(self) -> nn.ModuleList:
        return self.model.transformer.h

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.transformer.wte(ids)

    def _final_norm(self, last: torch.Tensor) -> torch.Tensor:
        return self.model.transformer.ln_f(last)

    def save_pretrained(self, directory: str | Path) -> None:
        """memexp's GDN-2 directory: config.json, model.safetensors (memexp's module names;
        LitGPT's MLP names load too) and the tokenizer when it can be saved."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        config = self.config.to_dict()
        config["bos_token_id"], config["eos_token_id"] = self.tokenizer.bos_id, self.tokenizer.eos_id
        (directory / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        save_weights(self.model, directory)
        if hasattr(self.tokenizer, "save"):
            self.tokenizer.save(directory)


def read_litgpt_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """The model tensors of a LitGPT .pth: the dict itself or its 'model' entry, with the
    training wrappers' prefixes (Fabric, DDP, torch.compile) removed."""
    try:
        ckpt = torch.load(str(path), map_location="cpu", weights_only=True, mmap=True)
    except Exception as e:  # torch raises several kinds for unreadable or unsafe pickles
        raise BackboneLoadError(f"{path}: cannot read the LitGPT checkpoint ({type(e).__name__}: "
                                f"{str(e).splitlines()[0] if str(e) else ''})") from None
    sd = ckpt["model"] if isinstance(ckpt, dict) and isinstance(ckpt.get("model"), dict) else ckpt
    out = {}
    for name, tensor in sd.items():
        if not isinstance(tensor, torch.Tensor):
            continue
        for prefix in WRAPPER_PREFIXES:
            name = name.removeprefix(prefix)
        out[name] = tensor
    return out


def find_litgpt_checkpoint(directory: Path) -> Path | None:
    if (directory / LITGPT_CHECKPOINT).is_file():
        return directory / LITGPT_CHECKPOINT
    found = sorted(directory.glob("*.pth"))
    return found[0] if len(found) == 1 else None


def read_checkpoint(directory: Path, overrides: dict, parse) -> Checkpoint:
    """A converted directory (config.json with model_type gdn2_litgpt) or a LitGPT .pth, whose
    architecture is read from its tensor shapes; `overrides` may set output_gate_activation."""
    converted = (directory / "config.json").is_file() and read_config(directory).get("model_type") == MODEL_TYPE
    litgpt = None if converted else find_litgpt_checkpoint(directory)
    if litgpt is not None:
        weights = read_litgpt_state_dict(litgpt)
        conf = GDN2Config.from_state_dict(weights, str(litgpt))
    else:
        weights = WeightFiles(directory)
        conf = parse(read_config(directory), where=str(directory / "config.json"))
    conf.output_gate_activation = overrides.get("output_gate_activation", conf.output_gate_activation)
    conf.check("backbone.model")
    return Checkpoint(conf, weights, str(litgpt or directory), litgpt_to_module_name)


ARCHITECTURE = Architecture(
    parse=GDN2Config.from_dict, model=GDN2ForCausalLM, backbone=GDN2Backbone, read=read_checkpoint,
    overrides=("output_gate_activation",),
    patterns=("*.json", *TOKENIZER_FILES, "*.safetensors", LITGPT_CHECKPOINT),
)


def build(cfg: BackboneConfig) -> GDN2Backbone:
    """A GDN-2 backbone from a LitGPT .pth or a converted directory (`cfg.pretrained`) or
    random weights (`cfg.model`). `cfg.model.output_gate_activation` may be set with a
    checkpoint too (the output-gate discrepancy)."""
    return build_backbone(cfg, ARCHITECTURE)
