"""PyTorch reference for causal softmax attention (the contract is
`memexp.kernels.attention.attention`'s), and the bottom-right causal mask both paths use."""

from __future__ import annotations

import torch


def causal_mask(tq: int, tk: int, window: int | None, device: torch.device) -> torch.Tensor:
    """[Tq, Tk] bool, True where query i may attend key j (bottom-right aligned)."""
    qpos = torch.arange(tk - tq, tk, device=device)[:, None]
    kpos = torch.arange(tk, device=device)[None, :]
    allowed = kpos <= qpos
    if window is not None:
        allowed &= kpos > qpos - window
    return allowed


def attention_ref(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float | None = None,
    window: int | None = None,
) -> torch.Tensor:
    """Softmax attention written out in fp32; arguments as in `attention`."""
    if scale is None:
        scale = q.shape[-1] ** -0.5
    rep = q.shape[2] // k.shape[2]
    kf, vf = (t.float().repeat_interleave(rep, dim=2) for t in (k, v))
    scores = torch.einsum("bqhd,bkhd->bhqk", q.float() * scale, kf)
    scores = scores.masked_fill(~causal_mask(q.shape[1], k.shape[1], window, q.device), float("-inf"))
    return torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), vf).to(q.dtype)
