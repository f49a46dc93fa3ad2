"""The gated delta rule (Gated DeltaNet's recurrence; the rule is written out in reference.py).

`gated_delta_rule` is the entry point: FLA's kernels for CUDA tensors when
`memexp.kernels.dispatch.use_kernels` allows them (through `memexp.kernels.fla`, the call GDN-2's
rule shares, which keeps backward-needing calls off FLA's fused-recurrent kernel), the PyTorch
reference forms of reference.py everywhere else, and for a backward FLA refuses on the GPU at hand
(`fla_refuses_backward`: Hopper with Triton >= 3.4.0 and < 3.7.1).
"""

from __future__ import annotations

import torch

from memexp.kernels.dispatch import use_kernels
from memexp.kernels.fla import fla_delta_rule, fla_refuses_backward
from memexp.kernels.gated_delta_rule.reference import chunk_gated_delta_rule_ref, recurrent_gated_delta_rule_ref
from memexp.kernels.l2norm import l2_norm
from memexp.kernels.recurrence import reference_form

RECURRENT_MAX_T = 8  # below this the per-token loop is cheaper than one padded chunk


def gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = True,
    use_qk_l2norm: bool = False,
    form: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Run the gated delta rule over a sequence, starting from `initial_state`.

    Args:
        q, k: [B, T, H, K] queries and keys (L2-normalised already unless `use_qk_l2norm`).
        v: [B, T, HV, V] values; HV must be a multiple of H.
        g: [B, T, HV] log-decay (<= 0), e.g. from `gdn_gate`.
        beta: [B, T, HV] write strength, already activated.
        scale: query scale, default K ** -0.5.
        initial_state: [B, HV, K, V] (fp32), or None for zeros.
        form: 'auto' | 'chunk' | 'recurrent' for the reference path; the kernel path
            picks FLA's fused_recurrent kernel for T <= 64 without gradients and the chunk
            kernel otherwise (`memexp.kernels.fla`).
    Returns:
        o: [B, T, HV, V] in v's dtype; final state [B, HV, K, V] fp32 (None unless asked).
    """
    # a backward FLA refuses on this GPU and Triton (memexp.kernels.fla) takes the reference ops below
    if not fla_refuses_backward("gated_delta_rule", q, k, v, g, beta) and use_kernels(v, "fla"):
        return fla_delta_rule("gated_delta_rule", q, k, v, {"g": g, "beta": beta}, scale, initial_state,
                              output_final_state, use_qk_l2norm)
    if use_qk_l2norm:
        q, k = l2_norm(q), l2_norm(k)
    if reference_form(form, q.shape[1], RECURRENT_MAX_T) == "recurrent":
        return recurrent_gated_delta_rule_ref(q, k, v, g, beta, scale, initial_state, output_final_state)
    return chunk_gated_delta_rule_ref(q, k, v, g, beta, scale, initial_state, output_final_state)


__all__ = ["chunk_gated_delta_rule_ref", "gated_delta_rule", "recurrent_gated_delta_rule_ref"]
