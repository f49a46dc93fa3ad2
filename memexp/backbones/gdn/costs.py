"""Gated DeltaNet's cost shapes (NoteBank App. C.6-C.7).

Projection and MLP FLOPs are counted from the model's Linear layers; only what no Linear
holds is written here: the short conv and the delta-rule recurrence (Eq. 11).
"""

from __future__ import annotations

from memexp.backbones.gdn.model import GDNConfig, GDNForCausalLM
from memexp.backbones.shapes import BackboneShapes, projection_flops


def recurrence_flops(heads: int, d_k: int, d_v: int) -> int:
    """Eq. 11, per token: state decay, key and query readouts, the rank-one update (7 d_k d_v)
    and vector scaling (d_k + 2 d_v), for each of `heads` [d_k, d_v] states."""
    return heads * (7 * d_k * d_v + d_k + 2 * d_v)


def conv_flops(kernel: int, channels: int) -> int:
    """Eq. 11's f_conv, per token: a depthwise causal conv of `kernel` taps over `channels`."""
    return 2 * kernel * channels


def mixer_flops(c: GDNConfig) -> int:
    """Per layer and token: the q/k/v short conv (none without use_short_conv) and the
    recurrence over the value heads."""
    conv = conv_flops(c.conv_size, 2 * c.key_dim + c.value_dim) if c.use_short_conv else 0
    return conv + recurrence_flops(c.v_heads, c.head_dim, c.head_v_dim)


def state_bytes(c: GDNConfig, dtype_bytes: int, conv_columns: int) -> dict[str, int]:
    """Per sequence: fp32 recurrent states [HV, d_k, d_v] per layer and q/k/v conv windows of
    `conv_columns` inputs over 2 key_dim + value_dim channels in `dtype_bytes`."""
    columns = conv_columns if c.use_short_conv else 0
    return {"recurrent": c.num_hidden_layers * c.v_heads * c.head_dim * c.head_v_dim * 4,
            "conv": c.num_hidden_layers * (2 * c.key_dim + c.value_dim) * columns * dtype_bytes, "kv": 0}


def cost_shapes(c: GDNConfig, dtype_bytes: int, window: int | None = None) -> BackboneShapes:
    """Conv windows counted at the full kernel width (FLA's cache; App. C.7's c_conv); every
    key head of every layer is a NoteBank channel. No attention: `window` plays no part."""
    body, head = projection_flops(GDNForCausalLM, c)
    s = state_bytes(c, dtype_bytes, c.conv_size)
    return BackboneShapes(
        layers=c.num_hidden_layers, hidden_size=c.hidden_size, vocab_size=c.vocab_size,
        flops_token=float(body + c.num_hidden_layers * mixer_flops(c)), flops_lm_head=float(head), flops_key=0.0,
        window=None, channels=c.num_hidden_layers * c.num_heads, d_k=c.head_dim, recurrent_bytes=s["recurrent"],
        conv_bytes=s["conv"], kv_bytes_per_token=0, dtype_bytes=dtype_bytes,
        channel_layers=tuple(range(c.num_hidden_layers)))
