"""Mamba-2's selective state space scan (SSD) with a carried initial state (the recurrence is
written out in reference.py).

`ssd` is the entry point: on CUDA tensors, when `memexp.kernels.dispatch.use_kernels` allows it,
mamba_ssm's `mamba_chunk_scan_combined` for chunks and its `selective_state_update` for single
decode tokens; the PyTorch reference forms of reference.py everywhere else.
"""

from __future__ import annotations

import math

import torch

from memexp.kernels.dispatch import kernel_module, use_kernels
from memexp.kernels.recurrence import reference_form
from memexp.kernels.ssd.reference import CHUNK, chunk_ssd_ref, recurrent_ssd_ref, step_sizes

RECURRENT_MAX_T = 16  # below this the per-token loop is cheaper than one padded chunk


def ssd(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    dt_softplus: bool = True,
    dt_limit: tuple[float, float] = (0.0, math.inf),
    initial_state: torch.Tensor | None = None,
    chunk_size: int = CHUNK,
    form: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the SSD recurrence over a sequence, starting from `initial_state`.

    Args:
        x: [B, T, H, P] inputs (the conv-activated x part of xBC).
        dt: [B, T, H] raw step sizes (before `dt_bias` and softplus).
        A: [H] negative decay rates (-exp(A_log)).
        B, C: [B, T, G, N] input and output projections; H must be a multiple of G.
        D: [H] skip weights, or None.
        initial_state: [B, H, P, N] (fp32), or None for zeros.
        chunk_size: chunk length of the kernel and of the chunked reference.
        form: 'auto' | 'chunk' | 'recurrent' for the reference path.
    Returns:
        y: [B, T, H, P] in x's dtype; final state [B, H, P, N] in fp32.
    """
    if use_kernels(x, "mamba_ssm"):
        if x.shape[1] == 1 and tuple(dt_limit) == (0.0, math.inf):
            return _ssd_step_kernel(x, dt, A, B, C, D, dt_bias, dt_softplus, initial_state)
        mamba_chunk_scan_combined = kernel_module("mamba_ssm.ops.triton.ssd_combined").mamba_chunk_scan_combined
        h0 = None if initial_state is None else initial_state.float().contiguous()
        y, final = mamba_chunk_scan_combined(
            x.contiguous(),
            dt.contiguous(),
            A.float(),
            B.contiguous(),
            C.contiguous(),
            chunk_size=chunk_size,
            D=D,
            dt_bias=dt_bias,
            initial_states=h0,
            dt_softplus=dt_softplus,
            dt_limit=tuple(dt_limit),
            return_final_states=True,
        )
        return y, final.float()
    dt = step_sizes(dt, dt_bias, dt_softplus, dt_limit)
    if reference_form(form, x.shape[1], RECURRENT_MAX_T) == "recurrent":
        return recurrent_ssd_ref(x, dt, A, B, C, D, initial_state)
    return chunk_ssd_ref(x, dt, A, B, C, D, initial_state, chunk_size)


def _ssd_step_kernel(x, dt, A, B, C, D, dt_bias, dt_softplus, initial_state):
    """One decode token on mamba_ssm's `selective_state_update`, the kernel its Mamba2.step
    uses: per-head scalars (A, dt, dt_bias, D) expanded over the head dimension as step()
    does (stride 0, the kernel's tied-dimension case). The kernel writes the state in place,
    so it gets a copy: the caller's state is never written."""
    selective_state_update = kernel_module("mamba_ssm.ops.triton.selective_state_update").selective_state_update

    batch, _, H, P = x.shape
    N = B.shape[-1]
    if initial_state is None:
        state = torch.zeros(batch, H, P, N, dtype=torch.float32, device=x.device)
    else:
        state = initial_state.float().clone().contiguous()
    y = selective_state_update(
        state,
        x[:, 0],
        dt[:, 0, :, None].expand(batch, H, P),
        A.float()[:, None, None].expand(H, P, N),
        B[:, 0],
        C[:, 0],
        D=None if D is None else D[:, None].expand(H, P),
        dt_bias=None if dt_bias is None else dt_bias[:, None].expand(H, P),
        dt_softplus=dt_softplus,
    )
    return y.unsqueeze(1), state


__all__ = ["chunk_ssd_ref", "recurrent_ssd_ref", "ssd", "step_sizes"]
