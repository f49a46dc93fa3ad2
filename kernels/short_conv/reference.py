"""PyTorch reference for the causal depthwise short convolution with a carried input window
(the contract is `memexp.kernels.short_conv.short_conv`'s)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def short_conv_window(batch: int, channels: int, kernel_size: int, dtype, device) -> torch.Tensor:
    """The window before any token: zeros [B, D, W - 1] (causal zero padding)."""
    return torch.zeros(batch, channels, kernel_size - 1, dtype=dtype, device=device)


def short_conv_ref(
    x: torch.Tensor,
    w: torch.Tensor,
    bias: torch.Tensor | None,
    window: torch.Tensor,
    activation: str | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [B, T, D], w [D, W], window [B, D, W - 1] -> (y [B, T, D] in x's dtype, the new window,
    a fresh tensor): one grouped conv1d over the window followed by the chunk."""
    D, W = w.shape
    xt = torch.cat([window.to(x.dtype), x.transpose(1, 2)], dim=-1)  # [B, D, W - 1 + T]
    y = F.conv1d(xt, w.unsqueeze(1).to(x.dtype), None if bias is None else bias.to(x.dtype), groups=D)
    if activation == "silu":
        y = F.silu(y)
    return y.transpose(1, 2), xt[..., xt.shape[-1] - (W - 1):].clone()
