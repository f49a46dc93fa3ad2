"""Per-token decay and write strength of Gated DeltaNet (Mamba-2 style gate)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def gdn_gate(
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor | None = None,
    allow_neg_eigval: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Turn the raw gate projections into the recurrence's log-decay and write strength.

        g    = -exp(A_log) * softplus(a + dt_bias)   (log of the per-step decay, <= 0)
        beta = sigmoid(b)                            (x2 when negative eigenvalues are allowed)

    Args:
        a, b: [..., HV] raw `a_proj` / `b_proj` outputs (any float dtype).
        A_log, dt_bias: [HV].
    Returns:
        g, beta: [..., HV] in fp32 (the kernels accumulate the decay in fp32).
    """
    x = a.float()
    if dt_bias is not None:
        x = x + dt_bias.float()
    g = -A_log.float().exp() * F.softplus(x)
    beta = torch.sigmoid(b.float())
    if allow_neg_eigval:
        beta = beta * 2
    return g, beta
