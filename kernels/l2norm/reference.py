"""PyTorch reference for the L2 normalisation of query/key vectors FLA's delta-rule kernels apply
in-kernel."""

from __future__ import annotations

import torch

L2_EPS = 1e-6


def l2_norm(x: torch.Tensor, eps: float = L2_EPS) -> torch.Tensor:
    """x / sqrt(sum(x^2) + eps) over the last dim, computed in fp32.

    The eps sits inside the square root (FLA's `use_qk_l2norm_in_kernel` form), unlike
    `F.normalize`, which clamps the norm. Returns fp32, shape of `x`.
    """
    xf = x.float()
    return xf * torch.rsqrt(xf.square().sum(-1, keepdim=True) + eps)
