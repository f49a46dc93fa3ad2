"""Causal depthwise short convolution that carries its input window across calls.

Used before the recurrence in Gated DeltaNet (q, k, v), GDN-2, Mamba-2 (xBC) and Qwen3.5
(qkv). The window holds the last W - 1 inputs (before the convolution), channels first,
so feeding a sequence in pieces gives exactly the output of feeding it whole.

`short_conv` dispatches CUDA tensors to Dao-AILab's causal-conv1d kernels (optional: the
`cuda` extra) when `memexp.kernels.dispatch` allows it and the shapes fit them: `causal_conv1d_fn`
for prefill chunks (channel-last, the only layout in which it takes an initial window and
returns the final one), `causal_conv1d_update` for single decode tokens. Everything else
takes the PyTorch reference of reference.py.
"""

from __future__ import annotations

import torch

from memexp.kernels.dispatch import use_kernels
from memexp.kernels.short_conv.reference import short_conv_ref, short_conv_window

KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


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
    if activation not in ("silu", None):
        raise ValueError(f"activation={activation!r}: allowed values are 'silu', None")
    B, T, D = x.shape
    w = weight.reshape(D, -1)
    W = w.shape[1]
    if window is None:
        window = short_conv_window(B, D, W, x.dtype, x.device)
    if _kernel_fits(x, W) and use_kernels(x, "causal_conv1d", required=False):
        return _short_conv_kernel(x, w, bias, window, activation)
    return short_conv_ref(x, w, bias, window, activation)


def _kernel_fits(x: torch.Tensor, W: int) -> bool:
    """causal-conv1d's own checks: width 2..4, float/half/bf16, and for the channel-last
    prefill kernel a channel count divisible by 8. Chunks of 2..W-1 tokens (rare: the
    prefill kernel's final window would need the initial one too) stay on the torch path."""
    T, D = x.shape[1], x.shape[2]
    if not 2 <= W <= 4 or x.dtype not in KERNEL_DTYPES:
        return False
    return T == 1 or (T >= W and D % 8 == 0)


def _short_conv_kernel(x, w, bias, window, activation):
    """The same contract as the torch path, on causal-conv1d's kernels."""
    from causal_conv1d import causal_conv1d_fn, causal_conv1d_update

    w = w.to(x.dtype).contiguous()
    bias = None if bias is None else bias.to(x.dtype).contiguous()
    if x.shape[1] == 1:
        # causal_conv1d_update writes the window in place; the caller's stays untouched.
        new_window = window.to(x.dtype).contiguous().clone()
        y = causal_conv1d_update(x[:, 0].contiguous(), new_window, w, bias, activation=activation)
        return y.unsqueeze(1), new_window
    # [B, T, D] contiguous viewed as [B, D, T] is the channel-last layout (stride(1) == 1).
    xc = x.contiguous().transpose(1, 2)
    initial = window.to(x.dtype).transpose(1, 2).contiguous().transpose(1, 2)
    y, final = causal_conv1d_fn(xc, w, bias, initial_states=initial, return_final_states=True,
                                activation=activation)
    return y.transpose(1, 2), final.contiguous()


__all__ = ["short_conv", "short_conv_ref", "short_conv_window"]
