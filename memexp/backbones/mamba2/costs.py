"""Mamba-2's cost shapes, the equivalents of NoteBank App. C.6-C.7 for an SSD layer.

in_proj and out_proj are counted from the model's Linear layers; written here are the
depthwise conv over x, B and C and the SSD recurrence.
"""

from __future__ import annotations

from memexp.backbones.gdn.costs import conv_flops
from memexp.backbones.mamba2.model import Mamba2Config, Mamba2ForCausalLM
from memexp.backbones.shapes import BackboneShapes, projection_flops


def recurrence_flops(heads: int, headdim: int, d_state: int) -> int:
    """Per token, for each head's [P, N] state: decay P N, update dt x B^T 2 P N, readout
    C 2 P N, plus dt x and the D skip 3 P."""
    return heads * (5 * headdim * d_state + 3 * headdim)


def mixer_flops(c: Mamba2Config) -> int:
    """Per layer and token: the conv over conv_dim = d_inner + 2 G N channels and the SSD
    recurrence."""
    return conv_flops(c.conv_kernel, c.conv_dim) + recurrence_flops(c.num_heads, c.head_dim, c.state_size)


def state_bytes(c: Mamba2Config, dtype_bytes: int, conv_columns: int, ssm_bytes: int = 4) -> dict[str, int]:
    """Per sequence: SSM states [heads, P, N] in `ssm_bytes` (fp32 as in App. C.7; mamba_ssm
    itself allocates them in the weight dtype) and conv windows of `conv_columns` inputs over
    conv_dim channels in `dtype_bytes`."""
    return {"recurrent": c.num_hidden_layers * c.num_heads * c.head_dim * c.state_size * ssm_bytes,
            "conv": c.num_hidden_layers * c.conv_dim * conv_columns * dtype_bytes, "kv": 0}


def cost_shapes(c: Mamba2Config, dtype_bytes: int, window: int | None = None) -> BackboneShapes:
    """Conv windows at the full kernel width (mamba_ssm's cache); each B/C group of each layer
    is a NoteBank channel of width d_state. No attention: `window` plays no part."""
    body, head = projection_flops(Mamba2ForCausalLM, c)
    s = state_bytes(c, dtype_bytes, c.conv_kernel)
    return BackboneShapes(
        layers=c.num_hidden_layers, hidden_size=c.hidden_size, vocab_size=c.vocab_size,
        flops_token=float(body + c.num_hidden_layers * mixer_flops(c)), flops_lm_head=float(head), flops_key=0.0,
        window=None, channels=c.num_hidden_layers * c.n_groups, d_k=c.state_size, recurrent_bytes=s["recurrent"],
        conv_bytes=s["conv"], kv_bytes_per_token=0, dtype_bytes=dtype_bytes,
        channel_layers=tuple(range(c.num_hidden_layers)))
