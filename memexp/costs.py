"""Analytical FLOPs and persistent storage (NoteBank paper, Section 5, App. C.6-C.7).

Multiply-adds count as two FLOPs. The shape functions take a checkpoint's config.json fields
(FLA GatedDeltaNet, mamba_ssm Mamba-2, HF Llama, HF Qwen3.5) and need no weights:

    f_phi   backbone FLOPs per token without the LM head: 2 d_in d_out per projection and MLP
            matrix, plus the short conv and the recurrence (Eq. 11) for recurrent layers;
    h_phi   LM-head FLOPs per prediction, 2 D V;
    f_key   attention FLOPs per (query, key) pair, summed over attention layers (4 H d_head).

Plain (Eq. 12), NoteBank's added FLOPs (Eqs. 13-15), the added-FLOPs ratio (Eq. 16) and
persistent storage (Eqs. 17-20) follow; `cost_report` assembles them for a run config and
`record_costs` for one recorded question.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from memexp.config import NoteBankConfig, RunConfig

MIB = 2**20
GIB = 2**30

# The question and answer lengths behind the paper's 1M-token GDN figures (App. C.6), recovered
# from its own numbers with f_phi = 2.7586e9 and h_phi = 1.311e8:
#   |Y|: mean Plain cost 2891.4 TFLOPs = (P + |Y| - 1) f_phi + |Y| h_phi at P = 1,048,019
#        -> |Y| in about [115, 149]; RULER NIAH generates 128 tokens.
#   |Q|: GDN routing costs 1.09 GFLOPs at N_T = 4092.3 (App. D.1, Fig. 7); Eq. 15 gives
#        |Q| (2 N_T J d_rho + 3 J d_rho) + 3 N_T J d_rho = 1.09e9 -> |Q| = 41.8.
#   |R|: the added 0.722 TFLOPs then leave (|Q| + |R|) f_phi = 0.4106e12 -> |R| = 107.2.
PAPER_QUESTION_TOKENS = 42
PAPER_OUTPUT_TOKENS = 128
PAPER_REPLAY_TOKENS = 107


def _element_bytes(dtype: torch.dtype | str | int) -> int:
    """Bytes per element of a torch dtype, its name, or an int already in bytes."""
    if isinstance(dtype, int):
        return dtype
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    return torch.empty((), dtype=dtype).element_size()


def fla_mlp_width(hidden: int, ratio: float | None) -> int:
    """FLA GatedMLP: 2/3 * hidden * hidden_ratio rounded up to a multiple of 256."""
    width = int(hidden * (ratio or 4) * 2 / 3)
    return 256 * ((width + 255) // 256)


def _recurrence_flops(heads: int, d_k: int, d_v: int) -> int:
    """Eq. 11: state decay, key and query readouts, the rank-one update (7 d_k d_v) and
    vector scaling (d_k + 2 d_v), per token and head."""
    return heads * (7 * d_k * d_v + d_k + 2 * d_v)


# GatedDeltaNet (FLA field names and defaults)


@dataclass(frozen=True)
class _GDN:
    hidden: int
    layers: int
    heads: int
    v_heads: int
    d_k: int
    d_v: int
    mlp: int
    conv: int  # short-conv width; 0 without short conv
    gate: bool
    vocab: int

    @classmethod
    def of(cls, config: dict) -> "_GDN":
        """Shapes of an FLA config.json, parsed by the GDN backbone's own config (defaults,
        value heads, FLA's MLP width rule) so costs and model never disagree."""
        from memexp.backbones.gdn.model import GDNConfig

        c = GDNConfig.from_dict(config)
        return cls(hidden=c.hidden_size, layers=c.num_hidden_layers, heads=c.num_heads, v_heads=c.v_heads,
                   d_k=c.head_dim, d_v=c.head_v_dim, mlp=c.mlp_dim, conv=c.conv_size if c.use_short_conv else 0,
                   gate=c.use_gate, vocab=c.vocab_size)

    @property
    def key_dim(self) -> int:
        return self.heads * self.d_k

    @property
    def value_dim(self) -> int:
        return self.v_heads * self.d_v


def _gdn_layer_flops(hidden: int, key_dim: int, value_dim: int, v_heads: int, d_k: int, d_v: int, conv: int,
                     gate: bool) -> int:
    """One GDN mixer per token: q, k, v, a, b, (g) and o projections, short conv, recurrence."""
    outputs = 2 * key_dim + value_dim + 2 * v_heads + (value_dim if gate else 0)
    proj = 2 * hidden * outputs + 2 * value_dim * hidden
    return proj + 2 * conv * (2 * key_dim + value_dim) + _recurrence_flops(v_heads, d_k, d_v)


def gdn_flops_per_token(config: dict) -> dict[str, float]:
    """FLOPs per token of an FLA GatedDeltaNet checkpoint (App. C.6).

    Returns {'backbone': f_phi, 'lm_head': h_phi}. Per layer: 2 d_in d_out for q, k, v, a, b,
    g, o and the three MLP matrices; short conv 2 c_conv (2 key_dim + value_dim); recurrence
    per value head (Eq. 11). Norms, activations and the embedding lookup are not counted.
    """
    g = _GDN.of(config)
    mixer = _gdn_layer_flops(g.hidden, g.key_dim, g.value_dim, g.v_heads, g.d_k, g.d_v, g.conv, g.gate)
    per_layer = mixer + 6 * g.hidden * g.mlp
    return {"backbone": float(g.layers * per_layer), "lm_head": float(2 * g.hidden * g.vocab)}


def gdn_state_bytes(config: dict, dtype_bytes: int | torch.dtype | str = 2, conv_columns: int | None = None
                    ) -> dict[str, int]:
    """Persistent state of an FLA GatedDeltaNet per sequence: {'recurrent', 'conv', 'kv'}.

    Recurrent states are fp32 [HV, d_k, d_v] per layer; q/k/v conv windows hold
    `conv_columns` inputs of 2 key_dim + value_dim channels in `dtype_bytes`. memexp's own
    state keeps conv_size - 1 inputs (the default); FLA's cache and App. C.7 (c_conv = 4) count
    conv_size.
    """
    g = _GDN.of(config)
    columns = max(g.conv - 1, 0) if conv_columns is None else (conv_columns if g.conv else 0)
    recurrent = g.layers * g.v_heads * g.d_k * g.d_v * 4
    conv = g.layers * (2 * g.key_dim + g.value_dim) * columns * _element_bytes(dtype_bytes)
    return {"recurrent": recurrent, "conv": conv, "kv": 0}


# Mamba-2 (mamba_ssm's or transformers' config.json, parsed by the backbone's config)


@dataclass(frozen=True)
class _Mamba2:
    hidden: int
    layers: int
    d_state: int
    headdim: int
    d_inner: int
    groups: int
    d_conv: int
    vocab: int  # padded to pad_vocab_size_multiple, the LM head's real width

    @classmethod
    def of(cls, config: dict) -> "_Mamba2":
        """Shapes parsed by the Mamba-2 backbone's own config (both checkpoint formats, the
        vocabulary padding, the 1.3B model's defaults); configs it cannot run (MLP or
        attention layers) are refused there."""
        from memexp.backbones.mamba2.model import Mamba2Config

        c = Mamba2Config.from_dict(config)
        return cls(hidden=c.hidden_size, layers=c.num_hidden_layers, d_state=c.state_size, headdim=c.head_dim,
                   d_inner=c.d_inner, groups=c.n_groups, d_conv=c.conv_kernel, vocab=c.vocab_size)

    @property
    def heads(self) -> int:
        return self.d_inner // self.headdim

    @property
    def conv_dim(self) -> int:
        return self.d_inner + 2 * self.groups * self.d_state


def mamba2_flops_per_token(config: dict) -> dict[str, float]:
    """FLOPs per token of a mamba_ssm Mamba-2 checkpoint, the equivalents of Eq. 11.

    Per layer: in_proj D -> 2 d_inner + 2 G N + heads and out_proj d_inner -> D; depthwise conv
    2 d_conv (d_inner + 2 G N); per head and token the SSD recurrence on a [P, N] state: decay
    P N, update dt x B^T 2 P N, readout C 2 P N, plus dt x and the D skip 3 P.
    """
    m = _Mamba2.of(config)
    in_proj = 2 * m.hidden * (2 * m.d_inner + 2 * m.groups * m.d_state + m.heads)
    out_proj = 2 * m.d_inner * m.hidden
    conv = 2 * m.d_conv * m.conv_dim
    recurrence = m.heads * (5 * m.headdim * m.d_state + 3 * m.headdim)
    per_layer = in_proj + out_proj + conv + recurrence
    return {"backbone": float(m.layers * per_layer), "lm_head": float(2 * m.hidden * m.vocab)}


def mamba2_state_bytes(config: dict, dtype_bytes: int | torch.dtype | str = 2, conv_columns: int | None = None,
                       state_bytes: int = 4) -> dict[str, int]:
    """Persistent state of Mamba-2 per sequence: SSM states [heads, P, N] in `state_bytes`
    (fp32 as in App. C.7; mamba_ssm itself allocates them in the weight dtype) and conv
    windows of `conv_columns` inputs over conv_dim channels in `dtype_bytes` (default
    d_conv - 1, what memexp keeps; mamba_ssm's cache holds d_conv)."""
    m = _Mamba2.of(config)
    columns = m.d_conv - 1 if conv_columns is None else conv_columns
    return {"recurrent": m.layers * m.heads * m.headdim * m.d_state * state_bytes,
            "conv": m.layers * m.conv_dim * columns * _element_bytes(dtype_bytes), "kv": 0}


# Attention (Llama's or FLA Transformer's config.json, parsed by the backbone's config)


@dataclass(frozen=True)
class _Attention:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    mlp: int
    vocab: int

    @classmethod
    def of(cls, config: dict) -> "_Attention":
        from memexp.backbones.attention.model import AttentionConfig

        c = AttentionConfig.from_dict(config)
        return cls(hidden=c.hidden_size, layers=c.num_hidden_layers, heads=c.num_attention_heads,
                   kv_heads=c.kv_heads, head_dim=c.dim_per_head, mlp=c.intermediate_size, vocab=c.vocab_size)


def attention_flops_per_token(config: dict) -> dict[str, float]:
    """FLOPs of a Llama-style Transformer: {'backbone', 'lm_head', 'attention_per_key'}.

    'backbone' counts q, k, v, o and the gated MLP per token; attention itself depends on how
    many keys a token sees, so it is 'attention_per_key' = 4 H d_head per layer (scores and
    weighted values) for each (query, key) pair.
    """
    a = _Attention.of(config)
    q, kv = a.heads * a.head_dim, a.kv_heads * a.head_dim
    per_layer = 2 * a.hidden * (q + 2 * kv) + 2 * q * a.hidden + 6 * a.hidden * a.mlp
    return {"backbone": float(a.layers * per_layer), "lm_head": float(2 * a.hidden * a.vocab),
            "attention_per_key": float(a.layers * 4 * a.heads * a.head_dim)}


def attention_state_bytes(config: dict, length: int, dtype_bytes: int | torch.dtype | str = 2,
                          window: int | None = None) -> dict[str, int]:
    """The KV cache after `length` tokens (capped at `window`), grouped-query heads as stored."""
    a = _Attention.of(config)
    kept = length if window is None else min(length, window)
    return {"recurrent": 0, "conv": 0, "kv": 2 * a.layers * a.kv_heads * a.head_dim * kept * _element_bytes(dtype_bytes)}


# Qwen3.5 hybrid (its config.json, `text_config` when nested, parsed by the backbone's config)


@dataclass(frozen=True)
class _Qwen35:
    hidden: int
    gdn_layers: int
    attn_layers: int
    k_heads: int
    v_heads: int
    d_k: int
    d_v: int
    conv: int
    heads: int
    kv_heads: int
    head_dim: int
    mlp: int
    vocab: int

    @classmethod
    def of(cls, config: dict) -> "_Qwen35":
        from memexp.backbones.hybrid.model import HybridConfig

        c = HybridConfig.from_dict(config)
        attn = sum(t == "full_attention" for t in c.layer_types)
        return cls(hidden=c.hidden_size, gdn_layers=len(c.layer_types) - attn, attn_layers=attn,
                   k_heads=c.linear_num_key_heads, v_heads=c.linear_num_value_heads, d_k=c.linear_key_head_dim,
                   d_v=c.linear_value_head_dim, conv=c.linear_conv_kernel_dim, heads=c.num_attention_heads,
                   kv_heads=c.num_key_value_heads, head_dim=c.head_dim, mlp=c.intermediate_size,
                   vocab=c.vocab_size)


def qwen35_flops_per_token(config: dict) -> dict[str, float]:
    """FLOPs of the Qwen3.5 hybrid: GDN layers as in Eq. 11 (in_proj_qkv, z, a, b, out_proj),
    attention layers with q_proj's doubled output (query and output gate); a dense MLP per layer."""
    h = _Qwen35.of(config)
    key_dim, value_dim = h.k_heads * h.d_k, h.v_heads * h.d_v
    gdn = _gdn_layer_flops(h.hidden, key_dim, value_dim, h.v_heads, h.d_k, h.d_v, h.conv, gate=True)
    q, kv = h.heads * h.head_dim, h.kv_heads * h.head_dim
    attn = 2 * h.hidden * (2 * q + 2 * kv) + 2 * q * h.hidden
    mlp = 6 * h.hidden * h.mlp
    backbone = h.gdn_layers * (gdn + mlp) + h.attn_layers * (attn + mlp)
    return {"backbone": float(backbone), "lm_head": float(2 * h.hidden * h.vocab),
            "attention_per_key": float(h.attn_layers * 4 * h.heads * h.head_dim)}


def qwen35_state_bytes(config: dict, length: int, dtype_bytes: int | torch.dtype | str = 2,
                       conv_columns: int | None = None) -> dict[str, int]:
    """fp32 GDN states, GDN conv windows (`conv_columns`, default kernel - 1) and the KV cache
    of the attention layers after `length` tokens."""
    h = _Qwen35.of(config)
    b = _element_bytes(dtype_bytes)
    columns = h.conv - 1 if conv_columns is None else conv_columns
    return {"recurrent": h.gdn_layers * h.v_heads * h.d_k * h.d_v * 4,
            "conv": h.gdn_layers * (2 * h.k_heads * h.d_k + h.v_heads * h.d_v) * columns * b,
            "kv": 2 * h.attn_layers * h.kv_heads * h.head_dim * length * b}


# One shape summary per backbone, then the paper's equations


@dataclass(frozen=True)
class BackboneShapes:
    """What the accounting needs from a checkpoint, all per sequence."""

    arch: str
    source: str  # where the config.json fields came from
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


def backbone_shapes(arch: str, config: dict, source: str = "config", dtype: int | torch.dtype | str = 2,
                    window: int | None = None) -> BackboneShapes:
    """Shapes of a `backbone.arch` checkpoint from its config.json fields. Conv windows are
    counted at the full kernel width (FLA's and mamba_ssm's caches; App. C.7's c_conv)."""
    b = _element_bytes(dtype)
    if arch == "gdn":
        g = _GDN.of(config)
        f, s = gdn_flops_per_token(config), gdn_state_bytes(config, b, conv_columns=g.conv)
        return BackboneShapes(arch, source, g.layers, g.hidden, g.vocab, f["backbone"], f["lm_head"], 0.0, None,
                              g.layers * g.heads, g.d_k, s["recurrent"], s["conv"], 0, b)
    if arch == "mamba2":
        m = _Mamba2.of(config)
        f, s = mamba2_flops_per_token(config), mamba2_state_bytes(config, b, conv_columns=m.d_conv)
        return BackboneShapes(arch, source, m.layers, m.hidden, m.vocab, f["backbone"], f["lm_head"], 0.0, None,
                              m.layers * m.groups, m.d_state, s["recurrent"], s["conv"], 0, b)
    if arch == "llama":
        a = _Attention.of(config)
        f = attention_flops_per_token(config)
        per_token = attention_state_bytes(config, 1, b)["kv"]
        return BackboneShapes(arch, source, a.layers, a.hidden, a.vocab, f["backbone"], f["lm_head"],
                              f["attention_per_key"], window, 0, 0, 0, 0, per_token, b)
    if arch == "qwen35":
        h = _Qwen35.of(config)
        f = qwen35_flops_per_token(config)
        s = qwen35_state_bytes(config, 1, b, conv_columns=h.conv)
        return BackboneShapes(arch, source, h.gdn_layers + h.attn_layers, h.hidden, h.vocab, f["backbone"],
                              f["lm_head"], f["attention_per_key"], window, h.gdn_layers * h.k_heads, h.d_k,
                              s["recurrent"], s["conv"], s["kv"], b)
    raise ValueError(f"backbone.arch={arch!r}: no cost model (covered: gdn, mamba2, llama, qwen35)")


def key_pairs(start: int, count: int, window: int | None = None) -> int:
    """(query, key) pairs when `count` tokens at positions start.. attend causally (each sees
    itself and every earlier token, at most `window` keys)."""
    if count <= 0:
        return 0
    lo, hi = start + 1, start + count  # keys seen by the first and the last token
    if window is None or hi <= window:
        return (lo + hi) * count // 2
    if lo >= window:
        return window * count
    below = window - lo + 1  # tokens that see fewer than `window` keys
    return (lo + window) * below // 2 + window * (count - below)


def plain_flops(shapes: BackboneShapes, context: int, question: int, output: int) -> float:
    """Eq. 12: (T + |Q| + |Y| - 1) f_phi + |Y| h_phi, plus attention over every earlier key
    for attention layers. The last input position predicts the first answer token."""
    steps = context + question + max(output, 1) - 1
    return steps * shapes.flops_token + output * shapes.flops_lm_head + shapes.flops_key * key_pairs(
        0, steps, shapes.window)


def notebank_added_flops(shapes: BackboneShapes, nb: NoteBankConfig, context: int, question: float, replay: float,
                         notes: float, output: int, probe: float | None = None) -> dict[str, float]:
    """Eqs. 13-15: F_NB - F_Plain = F_write + F_route + (|Q| + |R|) f_phi.

    write:  6 T J d_k + 4 ceil(T/C) J d_k + 2 T J + 6 (C + tail) floor(T/C)   (Eq. 14)
    route:  2 |Q| N_T J d_rho + 3 (|Q| + N_T) J d_rho                           (Eq. 15)
    probe, replay: |Q| f_phi and |R| f_phi, the question match and the replayed notes.
    attention: for hybrid / attention backbones, the keys the probe, the replay and the
    question and answer shifted behind the replay attend to (these do not cancel, App. C.6).
    An empty archive costs the writing only. Eq. 14 is the paper's bound for W = 2, used for
    W = 1 too. `probe` is the probed question length (default |Q| for the native router, 0
    for the others, which do not probe); routing is counted for the native router only (Eq. 15).
    """
    J, d_k, C = shapes.channels, shapes.d_k, nb.chunk_size
    if J == 0:
        raise ValueError(f"NoteBank needs recurrent channels; backbone arch {shapes.arch!r} has none")
    write = (6 * context * J * d_k + 4 * math.ceil(context / C) * J * d_k + 2 * context * J
             + 6 * (C + nb.tail) * (context // C))
    out = {"write": float(write), "route": 0.0, "probe": 0.0, "replay": 0.0, "attention": 0.0}
    if notes > 0:
        d_rho = min(nb.address_dim or d_k, d_k)
        if probe is None:
            probe = question if nb.router == "native" else 0.0
        if nb.router == "native":
            out["route"] = 2 * probe * notes * J * d_rho + 3 * (probe + notes) * J * d_rho
        out["probe"] = probe * shapes.flops_token
        out["replay"] = replay * shapes.flops_token
        if shapes.flops_key:
            q, r = round(question), round(replay)
            answer = q + max(output, 1) - 1
            pairs = (key_pairs(context, round(probe), shapes.window)
                     + key_pairs(context, r + answer, shapes.window) - key_pairs(context, answer, shapes.window))
            out["attention"] = shapes.flops_key * pairs
    out["total"] = sum(out.values())
    return out


def notebank_helper_bytes(shapes: BackboneShapes, nb: NoteBankConfig) -> int:
    """memexp NoteBank's resident helper: the fixed coordinate selection, [J, d_rho] int64
    (none with identity addresses, address_dim=null)."""
    return 0 if nb.address_dim is None else shapes.channels * min(nb.address_dim, shapes.d_k) * 8


def notebank_storage(shapes: BackboneShapes, nb: NoteBankConfig, notes: float, archived_tokens: float,
                     helper_bytes: float | None = None) -> dict[str, float]:
    """Eq. 19 plus helpers: bf16 addresses 2 N_T J d_rho and resident helper tensors on the
    device; int32 token ids 4 U and three uint64 per note (chunk, start, end) 24 N_T on the
    host. `helper_bytes` defaults to `notebank_helper_bytes`."""
    d_rho = min(nb.address_dim or shapes.d_k, shapes.d_k)
    helpers = notebank_helper_bytes(shapes, nb) if helper_bytes is None else helper_bytes
    return {"device_addresses": 2.0 * notes * shapes.channels * d_rho, "device_helpers": float(helpers),
            "host_token_ids": 4.0 * archived_tokens, "host_metadata": 24.0 * notes}


def mha_kv_cache_bytes(layers: int, hidden_size: int, length: int, dtype_bytes: int = 2) -> int:
    """Eq. 17: keys and values of full multi-head attention (no KV-head sharing) matched in
    width and depth, 2 * dtype_bytes * L * D * P (4 L D P in BF16)."""
    return 2 * dtype_bytes * layers * hidden_size * length


# Reports


@dataclass(frozen=True)
class _Counts:
    context: int
    question: float
    output: int
    replay: float
    notes: float
    archived: float
    probe: float | None
    assumed: tuple[str, ...]


def _counts(nb: NoteBankConfig | None, context: int, question: float, output: int, replay: float | None,
            notes: float | None, archived: float | None, probe: float | None = None) -> _Counts:
    """Fill unrecorded NoteBank counts with their bounds: W notes per chunk, full-length
    notes (B tokens), R notes replayed in full (|R| <= R B)."""
    assumed = []
    if nb is None:
        return _Counts(context, question, output, 0.0, 0.0, 0.0, None, ())
    if notes is None:
        notes = nb.write_budget * math.ceil(context / nb.chunk_size)
        assumed.append("notes = W * ceil(T / C)")
    if archived is None:
        archived = notes * nb.span_budget
        assumed.append("archived tokens = notes * B")
    if replay is None:
        replay = min(nb.replay_budget, notes) * nb.span_budget
        assumed.append("replay tokens = R * B")
    return _Counts(context, question, output, float(replay), float(notes), float(archived), probe, tuple(assumed))


def _costs(shapes: BackboneShapes, nb: NoteBankConfig | None, n: _Counts, helper_bytes: float | None) -> dict:
    plain = plain_flops(shapes, n.context, n.question, n.output)
    state = {"recurrent": shapes.recurrent_bytes, "conv": shapes.conv_bytes,
             "kv": shapes.kv_bytes_per_token * (n.context + n.question if shapes.window is None
                                                else min(n.context + n.question, shapes.window))}
    added = notebank_added_flops(shapes, nb, n.context, n.question, n.replay, n.notes, n.output, n.probe) if nb else None
    archive = notebank_storage(shapes, nb, n.notes, n.archived, helper_bytes) if nb else {}
    total = sum(state.values()) + sum(archive.values())
    mha = mha_kv_cache_bytes(shapes.layers, shapes.hidden_size, n.context + n.question, shapes.dtype_bytes)
    return {
        "flops": {
            "backbone_per_token": shapes.flops_token,
            "lm_head_per_token": shapes.flops_lm_head,
            "attention_per_key": shapes.flops_key,
            "plain": plain,
            "added": added,
            "added_ratio_percent": 100.0 * added["total"] / plain if added else 0.0,
        },
        "storage": {
            "state": state,
            "archive": archive,
            "total": total,
            "mha_kv_cache": mha,
            "mha_over_total": mha / total if total else None,
        },
    }


def cost_report(run_cfg: RunConfig, length: int, question_tokens: int = PAPER_QUESTION_TOKENS,
                output_tokens: int = PAPER_OUTPUT_TOKENS, replay_tokens: float | None = None,
                notes: float | None = None, archived_tokens: float | None = None,
                helper_bytes: float | None = None) -> dict[str, Any]:
    """Analytical FLOPs and persistent storage of `run_cfg` at `length` context tokens.

    Shapes come from the checkpoint's config.json (no weights; see memexp.checkpoint_shapes).
    NoteBank counts that are not given are bounded (`inputs.assumed` lists which); pass the
    recorded means to reproduce a measured setting. Precision is bf16 unless
    backbone.dtype=float32. All figures are plain numbers (FLOPs, bytes) for `--json`.
    """
    from memexp.checkpoint_shapes import shapes_for

    shapes = shapes_for(run_cfg.backbone)
    nb = run_cfg.method if isinstance(run_cfg.method, NoteBankConfig) else None
    n = _counts(nb, length, question_tokens, output_tokens, replay_tokens, notes, archived_tokens)
    report = {
        "backbone": {"name": run_cfg.backbone.name, "arch": shapes.arch, "source": shapes.source,
                     "layers": shapes.layers, "hidden_size": shapes.hidden_size, "vocab_size": shapes.vocab_size,
                     "channels": shapes.channels, "d_k": shapes.d_k, "window": shapes.window,
                     "dtype_bytes": shapes.dtype_bytes},
        "method": {"name": run_cfg.method.name, **({"C": nb.chunk_size, "W": nb.write_budget, "B": nb.span_budget,
                                                    "R": nb.replay_budget, "d_rho": nb.address_dim,
                                                    "tail": nb.tail} if nb else {})},
        "inputs": {"context": n.context, "question": n.question, "output": n.output, "replay": n.replay,
                   "notes": n.notes, "archived": n.archived, "assumed": list(n.assumed)},
    }
    if nb is None and run_cfg.method.name != "plain":
        report["note"] = f"added FLOPs of method {run_cfg.method.name!r} are not modelled; Plain figures only"
    return {**report, **_costs(shapes, nb, n, helper_bytes)}


_SHAPES_CACHE: dict[str, BackboneShapes] = {}


def record_costs(run_cfg_or_shapes: RunConfig | BackboneShapes, tokens: dict, stats: dict | None = None,
                 method: NoteBankConfig | None = None) -> dict[str, Any]:
    """Per-record accounting from recorded counts.

    `tokens`: {'context': T, 'question': |Q|, 'generated': |Y|} plus, for NoteBank, 'replay'
    |R| and optionally 'probe', 'notes' N_T and 'archived' U. `stats`: the read's
    `Memory.stats`; NoteBank's 'notes', 'archived_tokens' and 'address_index_bytes' are used
    when `tokens` lacks them. With a RunConfig the method comes from it; with BackboneShapes
    pass `method` (None = Plain).

    Returns plain_flops, added_flops, added_flops_ratio (percent, Eq. 16 for this record;
    aggregate runs as 100 * sum(added_flops) / sum(plain_flops)), state_bytes, archive_bytes
    (device + host), storage_bytes (their sum), mha_kv_cache_bytes and `assumed`: the counts
    that were not recorded and were bounded instead. Methods other than Plain and NoteBank get
    added_flops = added_flops_ratio = None (not modelled).
    """
    stats = stats or {}
    modelled = True
    if isinstance(run_cfg_or_shapes, BackboneShapes):
        shapes, nb = run_cfg_or_shapes, method
    else:
        from memexp.checkpoint_shapes import shapes_for

        key = repr(run_cfg_or_shapes.backbone)
        if key not in _SHAPES_CACHE:
            _SHAPES_CACHE[key] = shapes_for(run_cfg_or_shapes.backbone)
        shapes = _SHAPES_CACHE[key]
        m = run_cfg_or_shapes.method
        nb = m if isinstance(m, NoteBankConfig) else None
        modelled = nb is not None or m.name == "plain"
    notes = tokens.get("notes", stats.get("notes"))
    archived = tokens.get("archived", stats.get("archived_tokens"))
    n = _counts(nb, int(tokens["context"]), tokens.get("question", 0), int(tokens.get("generated", 0)),
                tokens.get("replay"), notes, archived, tokens.get("probe"))
    c = _costs(shapes, nb, n, stats.get("address_index_bytes"))
    added = c["flops"]["added"]["total"] if c["flops"]["added"] else 0.0
    return {
        "plain_flops": c["flops"]["plain"],
        "added_flops": added if modelled else None,
        "added_flops_ratio": c["flops"]["added_ratio_percent"] if modelled else None,
        "state_bytes": sum(c["storage"]["state"].values()),
        "archive_bytes": sum(c["storage"]["archive"].values()),
        "storage_bytes": c["storage"]["total"],
        "mha_kv_cache_bytes": c["storage"]["mha_kv_cache"],
        "assumed": list(n.assumed),
    }


def _flops(x: float) -> str:
    for unit, scale in (("TFLOPs", 1e12), ("GFLOPs", 1e9), ("MFLOPs", 1e6)):
        if abs(x) >= scale:
            return f"{x / scale:,.4g} {unit}"
    return f"{x:,.0f} FLOPs"


def _bytes(x: float) -> str:
    if abs(x) >= GIB:
        return f"{x / GIB:,.4g} GiB"
    return f"{x / MIB:,.4g} MiB"


def format_cost_table(report: dict[str, Any]) -> str:
    """The report as an aligned two-column table."""
    b, i, f, s = report["backbone"], report["inputs"], report["flops"], report["storage"]
    rows: list[tuple[str, str]] = [
        ("backbone", f"{b['name']} ({b['arch']}; {b['layers']} layers, hidden {b['hidden_size']}, "
                     f"J = {b['channels']} x d_k {b['d_k']}, vocab {b['vocab_size']})"),
        ("shapes from", b["source"]),
        ("method", ", ".join(f"{k}={v}" for k, v in report["method"].items())),
        ("tokens", f"T = {i['context']:,}, |Q| = {i['question']}, |Y| = {i['output']}"
                   + (f", |R| = {i['replay']:,.1f}, N_T = {i['notes']:,.1f}, U = {i['archived']:,.0f}"
                      if report["flops"]["added"] else "")),
        ("", ""),
        ("backbone FLOPs / token (f_phi)", f"{f['backbone_per_token']:.4e}"),
        ("LM head FLOPs / token (h_phi)", f"{f['lm_head_per_token']:.4e}"),
    ]
    if f["attention_per_key"]:
        rows.append(("attention FLOPs / (query, key)", f"{f['attention_per_key']:.4e}"))
    rows.append(("Plain FLOPs (Eq. 12)", _flops(f["plain"])))
    if f["added"]:
        for part in ("write", "route", "probe", "replay", "attention"):
            if f["added"][part]:
                rows.append((f"  added: {part}", _flops(f["added"][part])))
        rows.append(("added FLOPs (Eq. 13)", _flops(f["added"]["total"])))
        rows.append(("added FLOPs ratio (Eq. 16)", f"{f['added_ratio_percent']:.4f} %"))
    rows += [("", ""), ("recurrent state", _bytes(s["state"]["recurrent"])), ("conv state", _bytes(s["state"]["conv"]))]
    if s["state"]["kv"]:
        rows.append(("KV cache", _bytes(s["state"]["kv"])))
    a = s["archive"]
    if a:
        rows += [("note addresses (device)", _bytes(a["device_addresses"])),
                 ("helper tensors (device)", _bytes(a["device_helpers"])),
                 ("  device archive total", _bytes(a["device_addresses"] + a["device_helpers"])),
                 ("token ids + span metadata (host)", _bytes(a["host_token_ids"] + a["host_metadata"]))]
    rows += [("persistent storage (Eq. 20)", _bytes(s["total"])),
             ("matched full-MHA KV cache (Eq. 17)", _bytes(s["mha_kv_cache"]))]
    if s["mha_over_total"]:
        rows.append(("MHA cache / persistent storage", f"{s['mha_over_total']:,.0f} x"))
    if i["assumed"]:
        rows.append(("bounds used", "; ".join(i["assumed"])))
    if "note" in report:
        rows.append(("note", report["note"]))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" if k else "" for k, v in rows)
