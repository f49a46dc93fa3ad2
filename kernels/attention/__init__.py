"""Causal softmax attention over cached keys and values, with grouped KV heads and an optional
sliding window (the caches themselves are state a backbone carries: memexp.backbones.kv_cache).

Queries are the newest tokens: the i-th of Tq queries sits at the same position as the
(Tk - Tq + i)-th key (the cache ends with the chunk being processed). A query attends every
key at or before its own position and, with a window W, only the last W of them (itself
included) -- the bottom-right causal alignment of flash-attn.

`attention` is the entry point: flash-attn's kernel for half-precision CUDA tensors when
memexp.kernels.dispatch allows it, torch's SDPA with an explicit mask everywhere else;
reference.py's `attention_ref` is the readable reference.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from memexp.kernels.attention.reference import attention_ref, causal_mask
from memexp.kernels.dispatch import use_kernels


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float | None = None,
    window: int | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Args:
        q: [B, Tq, H, D] queries of the newest Tq tokens.
        k, v: [B, Tk, Hkv, D] keys and values up to and including those tokens (Tk >= Tq);
            H must be a multiple of Hkv (query head h reads KV head h // (H / Hkv)).
        scale: softmax scale, default D ** -0.5.
        window: attend only the last `window` positions (None: all).
        mask: [Tq, Tk] bool, True where a query may attend a key, replacing the causal alignment
            above (a static KV buffer, whose written rows are not its first Tk; see memexp.backbones.kv_cache).
    Returns:
        o: [B, Tq, H, D] in q's dtype.
    """
    if scale is None:
        scale = q.shape[-1] ** -0.5
    if mask is None and q.dtype in (torch.float16, torch.bfloat16) and use_kernels(q, "flash_attn"):
        from flash_attn import flash_attn_func

        return flash_attn_func(
            q, k, v, softmax_scale=scale, causal=True, window_size=(-1, -1) if window is None else (window - 1, 0)
        )
    tq, tk = q.shape[1], k.shape[1]
    # With nothing cached before the chunk and no window that bites, the mask is torch's own
    # top-left causal one, which lets SDPA pick its fused kernels instead of its math path.
    plain_causal = mask is None and tq == tk and (window is None or window >= tk)
    if mask is None and not plain_causal:
        mask = causal_mask(tq, tk, window, q.device)
    o = F.scaled_dot_product_attention(
        q.transpose(1, 2),
        k.transpose(1, 2),
        v.transpose(1, 2),
        attn_mask=mask,
        is_causal=plain_causal,
        scale=scale,
        enable_gqa=q.shape[2] != k.shape[2],
    )
    return o.transpose(1, 2)


__all__ = ["attention", "attention_ref", "causal_mask"]
