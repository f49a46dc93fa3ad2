"""Gated DeltaNet-2's cost shapes, by the NoteBank App. C.6-C.7 conventions.

Projection FLOPs (q, k, v, the low-rank f and g, b, w, o and the MLP) are counted from the
model's Linear layers; written here are the q/k/v short conv and the channel-gated
recurrence.
"""

from __future__ import annotations

from memexp.backbones.gdn.costs import conv_flops
from memexp.backbones.gdn2.model import GDN2Config, GDN2ForCausalLM
from memexp.backbones.shapes import BackboneShapes, projection_flops


def recurrence_flops(heads: int, d_k: int, d_v: int) -> int:
    """Per token, for each of `heads` [d_k, d_v] states: the channel-wise decay, the erase
    (b-gated read) and write (w-gated) rank-one terms and the readout, 7 d_k d_v, plus the
    gates' vector scaling 3 d_k + 3 d_v (GDN's Eq. 11 with GDN-2's per-channel gates)."""
    return heads * (7 * d_k * d_v + 3 * d_k + 3 * d_v)


def mixer_flops(c: GDN2Config) -> int:
    """Per layer and token: the q/k/v short conv and the recurrence over the value heads."""
    return conv_flops(c.conv_size, 2 * c.key_dim + c.value_dim) + recurrence_flops(c.v_heads, c.head_dim,
                                                                                 c.head_v_dim)


def state_bytes(c: GDN2Config, dtype_bytes: int, conv_columns: int) -> dict[str, int]:
    """Per sequence: fp32 recurrent states [HV, d_k, d_v] per layer and q/k/v conv windows of
    `conv_columns` inputs over 2 key_dim + value_dim channels in `dtype_bytes`."""
    return {"recurrent": c.num_hidden_layers * c.v_heads * c.head_dim * c.head_v_dim * 4,
            "conv": c.num_hidden_layers * (2 * c.key_dim + c.value_dim) * conv_columns * dtype_bytes, "kv": 0}


def cost_shapes(c: GDN2Config, dtype_bytes: int, window: int | None = None) -> BackboneShapes:
    """Conv windows at the full kernel width (App. C.7's c_conv); every key head of every layer
    is a NoteBank channel (18 x 16 = 288 for the paper's checkpoint, App. C.1). No attention:
    `window` plays no part."""
    body, head = projection_flops(GDN2ForCausalLM, c)
    s = state_bytes(c, dtype_bytes, c.conv_size)
    return BackboneShapes(
        layers=c.num_hidden_layers, hidden_size=c.hidden_size, vocab_size=c.vocab_size,
        flops_token=float(body + c.num_hidden_layers * mixer_flops(c)), flops_lm_head=float(head), flops_key=0.0,
        window=None, channels=c.num_hidden_layers * c.num_heads, d_k=c.head_dim, recurrent_bytes=s["recurrent"],
        conv_bytes=s["conv"], kv_bytes_per_token=0, dtype_bytes=dtype_bytes,
        channel_layers=tuple(range(c.num_hidden_layers)))
