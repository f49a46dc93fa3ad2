"""RMSNorm and gated RMSNorm, computed in fp32 and returned in the input dtype.

This is the order FLA's fused norms use (normalise and scale in fp32, then cast), shared by
GDN's output norm (norm, then gate) and Mamba-2's (gate, then norm, per group).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps) * weight over the last dim. x: [..., D]; weight: [D]."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.float()
    return y.to(x.dtype)


def _activate(gate: torch.Tensor, activation: str) -> torch.Tensor:
    if activation in ("silu", "swish"):
        return F.silu(gate)
    if activation == "sigmoid":
        return torch.sigmoid(gate)
    raise ValueError(f"activation={activation!r}: allowed values are silu, swish, sigmoid")


def gated_rms_norm(
    x: torch.Tensor,
    gate: torch.Tensor,
    weight: torch.Tensor | None,
    eps: float,
    activation: str = "silu",
    norm_before_gate: bool = True,
    group_size: int | None = None,
) -> torch.Tensor:
    """Gated RMSNorm over the last dim of x: [..., D] with gate: [..., D].

    norm_before_gate=True (GDN, FLA's FusedRMSNormGated): rms_norm(x) * weight * act(gate).
    norm_before_gate=False (Mamba-2): rms_norm(x * act(gate)) * weight.
    group_size normalises each consecutive group of that many channels on its own
    (Mamba-2 with ngroups > 1); None normalises the whole last dim.
    """
    D = x.shape[-1]
    gs = D if group_size is None else group_size
    if D % gs:
        raise ValueError(f"group_size={gs} does not divide the normalised width {D}")
    xf, zf = x.float(), _activate(gate.float(), activation)
    if not norm_before_gate:
        xf = xf * zf
    grouped = xf.unflatten(-1, (D // gs, gs))
    y = (grouped * torch.rsqrt(grouped.square().mean(-1, keepdim=True) + eps)).flatten(-2)
    if weight is not None:
        y = y * weight.float()
    if norm_before_gate:
        y = y * zf
    return y.to(x.dtype)
