"""Causal depthwise short convolution that carries its input window across calls.

Used before the recurrence in Gated DeltaNet (q, k, v), GDN-2, Mamba-2 (xBC) and Qwen3.5
(qkv). The window holds the last W - 1 inputs (before the convolution), channels first,
so feeding a sequence in pieces gives exactly the output of feeding it whole.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def short_conv_window(batch: int, channels: int, kernel_size: int, dtype, device) -> torch.Tensor:
    """The window before any token: zeros [B, D, W - 1] (causal zero padding)."""
    return torch.zeros(batch, channels, kernel_size - 1, dtype=dtype, device=device)


def short_conv(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    window: torch.Tensor | None = None,
    activation: str | None = "silu",
) -> tuple[torch.Tensor, torch.Tensor]:
    """y_t = act(bias + sum_i weight[:, i] * x_{t - W + 1 + i}), per channel.

    Args:
        x: [B, T, D] inputs.
        weight: [D, W] or nn.Conv1d's [D, 1, W] (last tap multiplies the current token).
        bias: [D] or None.
        window: [B, D, W - 1] the previous W - 1 inputs (oldest first), None for zeros.
        activation: 'silu' or None.
    Returns:
        y: [B, T, D] in x's dtype; the new window [B, D, W - 1] (a fresh tensor; the old
        window is never written).
    """
    B, T, D = x.shape
    w = weight.reshape(D, -1)
    W = w.shape[1]
    if window is None:
        window = short_conv_window(B, D, W, x.dtype, x.device)
    xt = torch.cat([window.to(x.dtype), x.transpose(1, 2)], dim=-1)  # [B, D, W - 1 + T]
    y = F.conv1d(xt, w.unsqueeze(1).to(x.dtype), None if bias is None else bias.to(x.dtype), groups=D)
    if activation == "silu":
        y = F.silu(y)
    elif activation is not None:
        raise ValueError(f"activation={activation!r}: allowed values are 'silu', None")
    return y.transpose(1, 2), xt[..., xt.shape[-1] - (W - 1):].clone()
