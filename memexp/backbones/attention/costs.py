"""Attention-only Transformers' cost shapes (NoteBank App. C.5-C.6).

q, k, v, o and the MLP are counted from the model's Linear layers; attention itself depends on
how many keys a token sees, so it is a cost per (query, key) pair that the report multiplies
by the causal key count.
"""

from __future__ import annotations

from memexp.backbones.attention.model import AttentionConfig, LlamaForCausalLM
from memexp.backbones.shapes import BackboneShapes, projection_flops


def attention_per_key_flops(layers: int, heads: int, head_dim: int) -> int:
    """Per (query, key) pair: the score q.k and the weighted value, 2 x 2 d_head per query head
    and layer."""
    return layers * 4 * heads * head_dim


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, dtype_bytes: int) -> int:
    """Keys and values of one retained token, grouped-query heads as stored."""
    return 2 * layers * kv_heads * head_dim * dtype_bytes


def cost_shapes(c: AttentionConfig, dtype_bytes: int, window: int | None = None) -> BackboneShapes:
    """No recurrent channels and no recurrent state; the KV cache grows per token (at most
    `window` tokens with sliding-window attention)."""
    body, head = projection_flops(LlamaForCausalLM, c)
    return BackboneShapes(
        layers=c.num_hidden_layers, hidden_size=c.hidden_size, vocab_size=c.vocab_size, flops_token=float(body),
        flops_lm_head=float(head),
        flops_key=float(attention_per_key_flops(c.num_hidden_layers, c.num_attention_heads, c.dim_per_head)),
        window=window, channels=0, d_k=0, recurrent_bytes=0, conv_bytes=0,
        kv_bytes_per_token=kv_bytes_per_token(c.num_hidden_layers, c.kv_heads, c.dim_per_head, dtype_bytes),
        dtype_bytes=dtype_bytes)
