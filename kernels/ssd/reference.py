"""Mamba-2's selective state space scan (SSD) with a carried initial state.

Per head h (of H, each reading B/C group h // (H / G)) with state S [P, N], per token t:

    dt_t = clamp(softplus(dt_raw_t + dt_bias), dt_limit)     step size
    S   <- exp(dt_t * A_h) * S + dt_t * x_t B_t^T             decay, then write
    y_t  = S C_t + D_h * x_t                                   readout plus skip

This file holds the step-size discretisation and the two reference forms (fp32, plain PyTorch);
`memexp.kernels.ssd` dispatches to mamba_ssm's kernels or to them. The state layout
[B, H, P, N] (value-first) and fp32 precision match mamba_ssm's inference cache.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from memexp.kernels.recurrence import fp32_state

CHUNK = 256  # mamba2-1.3b's chunk size; any value gives the same result up to rounding


def step_sizes(
    dt: torch.Tensor,
    dt_bias: torch.Tensor | None = None,
    dt_softplus: bool = True,
    dt_limit: tuple[float, float] = (0.0, math.inf),
) -> torch.Tensor:
    """Discretisation step dt [B, T, H] in fp32: softplus(dt + dt_bias) clamped to `dt_limit`."""
    dt = dt.float()
    if dt_bias is not None:
        dt = dt + dt_bias.float()
    if dt_softplus:
        dt = F.softplus(dt)
    if tuple(dt_limit) != (0.0, math.inf):
        dt = dt.clamp(min=dt_limit[0], max=dt_limit[1])
    return dt


def _per_head(B: torch.Tensor, C: torch.Tensor, H: int) -> tuple[torch.Tensor, torch.Tensor]:
    """B, C [B, T, G, N] -> [B, T, H, N] fp32, head h reading group h // (H / G)."""
    G = B.shape[2]
    if H % G:
        raise ValueError(f"{H} heads are not a multiple of {G} B/C groups")
    return B.float().repeat_interleave(H // G, dim=2), C.float().repeat_interleave(H // G, dim=2)


def recurrent_ssd_ref(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-by-token reference in fp32; `dt` already discretised (see `step_sizes`)."""
    H = x.shape[2]
    Bh, Ch = _per_head(B, C, H)
    xf = x.float()
    S = fp32_state(initial_state, (x.shape[0], H, x.shape[3], Bh.shape[-1]), x.device)
    decay = torch.exp(dt * A.float())
    y = torch.empty_like(xf)
    for t in range(x.shape[1]):
        S = decay[:, t, :, None, None] * S + torch.einsum("bh,bhp,bhn->bhpn", dt[:, t], xf[:, t], Bh[:, t])
        y[:, t] = torch.einsum("bhpn,bhn->bhp", S, Ch[:, t])
    if D is not None:
        y = y + D.float()[:, None] * xf
    return y.to(x.dtype), S


def chunk_ssd_ref(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
    chunk_size: int = CHUNK,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunked reference in fp32 (the SSD block decomposition); `dt` already discretised.

    Within a chunk, with a_t = dt_t A the per-step log-decay, L_t its cumulative sum since the
    chunk start and S0 the state entering the chunk,

        y_t = exp(L_t) C_t S0 + sum_{s<=t} exp(L_t - L_s) (C_t . B_s) dt_s x_s
        S   = exp(L_end) S0 + sum_s exp(L_end - L_s) dt_s x_s B_s^T

    The sequence is zero-padded to whole chunks (dt = 0 leaves S unchanged).
    """
    b, T, H, P = x.shape
    Bh, Ch = _per_head(B, C, H)
    N = Bh.shape[-1]
    S = fp32_state(initial_state, (b, H, P, N), x.device)
    xf = x.float()
    xdt = xf * dt[..., None]
    a = dt * A.float()
    Q = chunk_size
    pad = (-T) % Q
    if pad:
        xdt, Bh, Ch = (F.pad(t, (0, 0, 0, 0, 0, pad)) for t in (xdt, Bh, Ch))
        a = F.pad(a, (0, 0, 0, pad))
    n = (T + pad) // Q
    xdt, Bh, Ch = (t.reshape(b, n, Q, H, -1) for t in (xdt, Bh, Ch))
    L = a.reshape(b, n, Q, H).cumsum(2)

    causal = torch.ones(Q, Q, dtype=torch.bool, device=x.device).tril()
    pair_decay = (L[:, :, :, None] - L[:, :, None, :]).masked_fill(~causal[..., None], -math.inf).exp()
    scores = torch.einsum("bctHn,bcsHn->bctsH", Ch, Bh) * pair_decay
    y = torch.einsum("bctsH,bcsHp->bctHp", scores, xdt)
    to_end = (L[:, :, -1:] - L).exp()
    writes = torch.einsum("bcsH,bcsHn,bcsHp->bcHpn", to_end, Bh, xdt)
    from_start = L.exp()
    for c in range(n):
        y[:, c] += torch.einsum("btH,btHn,bHpn->btHp", from_start[:, c], Ch[:, c], S)
        S = L[:, c, -1, :, None, None].exp() * S + writes[:, c]
    y = y.reshape(b, n * Q, H, P)[:, :T]
    if D is not None:
        y = y + D.float()[:, None] * xf
    return y.to(x.dtype), S
