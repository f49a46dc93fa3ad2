"""The Qwen3.5 hybrid's cost shapes (NoteBank App. C.6-C.7; attention as in App. C.6's
hybrid note).

Every projection (in_proj_qkv, z, a, b, out_proj; q_proj's doubled output for the query and
its gate, k, v, o) and the MLP are counted from the model's Linear layers; written here are the
GDN layers' conv and recurrence (Eq. 11) and the attention layers' cost per (query, key) pair.
"""

from __future__ import annotations

from memexp.backbones.attention.costs import attention_per_key_flops, kv_bytes_per_token
from memexp.backbones.gdn.costs import conv_flops, recurrence_flops
from memexp.backbones.hybrid.model import HybridConfig, Qwen35ForCausalLM
from memexp.backbones.shapes import BackboneShapes, projection_flops


def layer_counts(c: HybridConfig) -> tuple[int, int]:
    """(GDN layers, attention layers)."""
    attn = sum(t == "full_attention" for t in c.layer_types)
    return len(c.layer_types) - attn, attn


def mixer_flops(c: HybridConfig) -> int:
    """Per GDN layer and token: the conv over the fused q/k/v channels and the recurrence over
    the value heads."""
    return conv_flops(c.linear_conv_kernel_dim, c.conv_dim) + recurrence_flops(
        c.linear_num_value_heads, c.linear_key_head_dim, c.linear_value_head_dim)


def state_bytes(c: HybridConfig, dtype_bytes: int, conv_columns: int) -> dict[str, int]:
    """Per sequence, before any token: fp32 GDN states and GDN conv windows of `conv_columns`
    inputs; 'kv_per_token' is what the attention layers add per retained token."""
    gdn, attn = layer_counts(c)
    return {"recurrent": gdn * c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim * 4,
            "conv": gdn * c.conv_dim * conv_columns * dtype_bytes,
            "kv_per_token": kv_bytes_per_token(attn, c.num_key_value_heads, c.head_dim, dtype_bytes)}


def cost_shapes(c: HybridConfig, dtype_bytes: int, window: int | None = None) -> BackboneShapes:
    """NoteBank channels are the GDN layers' key heads; conv windows at the full kernel width."""
    body, head = projection_flops(Qwen35ForCausalLM, c)
    gdn, attn = layer_counts(c)
    s = state_bytes(c, dtype_bytes, c.linear_conv_kernel_dim)
    return BackboneShapes(
        layers=c.num_hidden_layers, hidden_size=c.hidden_size, vocab_size=c.vocab_size,
        flops_token=float(body + gdn * mixer_flops(c)), flops_lm_head=float(head),
        flops_key=float(attention_per_key_flops(attn, c.num_attention_heads, c.head_dim)), window=window,
        channels=gdn * c.linear_num_key_heads, d_k=c.linear_key_head_dim, recurrent_bytes=s["recurrent"],
        conv_bytes=s["conv"], kv_bytes_per_token=s["kv_per_token"], dtype_bytes=dtype_bytes,
        channel_layers=tuple(i for i, t in enumerate(c.layer_types) if t != "full_attention"))
