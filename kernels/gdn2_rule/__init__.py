"""The GDN-2 rule (Gated DeltaNet-2's recurrence; the rule is written out in reference.py).

`gdn2_rule` is the entry point: FLA's GDN-2 kernels for CUDA tensors when
`memexp.kernels.dispatch.use_kernels` allows them (through `memexp.kernels.fla`, the call the
gated delta rule shares, which keeps backward-needing calls off FLA's fused-recurrent kernel),
the PyTorch reference forms of reference.py everywhere else.
"""

from __future__ import annotations

import torch

from memexp.kernels.dispatch import use_kernels
from memexp.kernels.fla import fla_delta_rule
from memexp.kernels.gdn2_rule.reference import chunk_gdn2_ref, recurrent_gdn2_ref
from memexp.kernels.l2norm import l2_norm
from memexp.kernels.recurrence import reference_form

RECURRENT_MAX_T = 8  # below this the per-token loop is cheaper than one padded chunk


def gdn2_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    b: torch.Tensor,
    w: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    use_qk_l2norm: bool = False,
    form: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the GDN-2 rule over a sequence, starting from `initial_state`.

    Args:
        q, k: [B, T, H, K] queries and keys (L2-normalised already unless `use_qk_l2norm`).
        v: [B, T, H, V] values.
        g: [B, T, H, K] per-channel log-decay (<= 0).
        b: [B, T, H, K] erase gate; w: [B, T, H, V] write gate (both activated).
        scale: query scale, default K ** -0.5.
        initial_state: [B, H, K, V] (fp32), or None for zeros.
        form: 'auto' | 'chunk' | 'recurrent' for the reference path; the kernel path
            picks FLA's fused_recurrent kernel for T <= 64 without gradients and the chunk
            kernel otherwise (`memexp.kernels.fla`).
    Returns:
        o: [B, T, H, V] in v's dtype; final state [B, H, K, V] fp32.
    """
    if use_kernels(v, "fla"):
        return fla_delta_rule("gdn2", q, k, v, {"g": g, "b": b, "w": w}, scale, initial_state, True, use_qk_l2norm)
    if use_qk_l2norm:
        q, k = l2_norm(q), l2_norm(k)
    if reference_form(form, q.shape[1], RECURRENT_MAX_T) == "recurrent":
        return recurrent_gdn2_ref(q, k, v, g, b, w, scale, initial_state)
    return chunk_gdn2_ref(q, k, v, g, b, w, scale, initial_state)


__all__ = ["chunk_gdn2_ref", "gdn2_rule", "recurrent_gdn2_ref"]
