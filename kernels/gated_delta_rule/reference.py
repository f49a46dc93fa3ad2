"""The gated delta rule: Gated DeltaNet's recurrence, in recurrent and chunked (WY/UT) form.

Per value head, with state S [K, V] (memexp and FLA's default layout), per token t:

    S   <- exp(g_t) * S                          decay
    u_t  = beta_t * (v_t - S^T k_t)              delta-rule correction (the "new value")
    S   <- S + k_t u_t^T                         rank-one write
    o_t  = S^T (scale * q_t)                     readout

Grouped value heads: with HV = G * H value heads, value head j reads query/key head j // G
(FLA's GVA mapping, and Qwen3.5's repeat_interleave).

This file holds the two reference forms (fp32, plain PyTorch); `memexp.kernels.gated_delta_rule`
dispatches to FLA's kernels or to them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from memexp.kernels.recurrence import fp32_state

CHUNK = 64


def _heads_first(q, k, v, g, beta, scale):
    """fp32, [B, HV, T, *] layout, q/k repeated over value-head groups, q pre-scaled."""
    H, HV = q.shape[2], v.shape[2]
    if HV % H:
        raise ValueError(f"{HV} value heads are not a multiple of {H} query/key heads")
    if scale is None:
        scale = q.shape[-1] ** -0.5
    q, k = (x.repeat_interleave(HV // H, dim=2) if HV != H else x for x in (q, k))
    q = q.float() * scale
    q, k, v = (x.float().transpose(1, 2) for x in (q, k, v))
    g, beta = (x.float().transpose(1, 2) for x in (g, beta))
    return q, k, v, g, beta


def recurrent_gated_delta_rule_ref(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Token-by-token reference in fp32; shapes as in `gated_delta_rule`."""
    out_dtype = v.dtype
    q, k, v, g, beta = _heads_first(q, k, v, g, beta, scale)
    B, HV, T, K = k.shape
    V = v.shape[-1]
    S = fp32_state(initial_state, (B, HV, K, V), q.device)
    o = v.new_empty(B, HV, T, V)
    for t in range(T):
        S = S * g[:, :, t].exp()[..., None, None]
        kt = k[:, :, t]
        u = beta[:, :, t, None] * (v[:, :, t] - torch.einsum("bhk,bhkv->bhv", kt, S))
        S = S + kt[..., :, None] * u[..., None, :]
        o[:, :, t] = torch.einsum("bhk,bhkv->bhv", q[:, :, t], S)
    return o.transpose(1, 2).to(out_dtype), (S if output_final_state else None)


def chunk_gated_delta_rule_ref(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = True,
    chunk_size: int = CHUNK,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Chunked reference in fp32 (WY representation via the UT transform).

    Within a chunk, with G_t the cumulative log-decay since the chunk start and S0 the state
    entering it, the new values solve a unit lower-triangular system,

        (I + L) u = beta * v - (beta * exp(G) * k) S0,   L_tj = beta_t exp(G_t - G_j) k_t.k_j  (j < t)

    so u = U - W S0 with U, W shared by every chunk and computed in one batched solve; then

        o_t = exp(G_t) q_t S0 + sum_{j<=t} exp(G_t - G_j) (q_t.k_j) u_j
        S   = exp(G_C) S0 + sum_j exp(G_C - G_j) k_j u_j^T

    The sequence is zero-padded to whole chunks (k = v = beta = g = 0 leaves S unchanged).
    Memory is O(T * chunk_size) per head; shapes as in `gated_delta_rule`.
    """
    out_dtype = v.dtype
    q, k, v, g, beta = _heads_first(q, k, v, g, beta, scale)
    B, HV, T, K = k.shape
    V = v.shape[-1]
    S = fp32_state(initial_state, (B, HV, K, V), q.device)
    C = chunk_size
    pad = (-T) % C
    if pad:
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
        g, beta = (F.pad(x, (0, pad)) for x in (g, beta))
    N = (T + pad) // C
    q, k, v = (x.reshape(B, HV, N, C, -1) for x in (q, k, v))
    g, beta = (x.reshape(B, HV, N, C) for x in (g, beta))

    G = g.cumsum(-1)
    causal = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    decay = (G[..., :, None] - G[..., None, :]).masked_fill(~causal, float("-inf")).exp()
    kb = k * beta[..., None]
    L = (kb @ k.transpose(-1, -2) * decay).tril(-1)
    eye = torch.eye(C, dtype=torch.float32, device=q.device)
    A = L + eye
    U = torch.linalg.solve_triangular(A, v * beta[..., None], upper=False, unitriangular=True)
    W = torch.linalg.solve_triangular(A, kb * G.exp()[..., None], upper=False, unitriangular=True)
    QK = q @ k.transpose(-1, -2) * decay
    q_decayed = q * G.exp()[..., None]
    k_to_end = k * (G[..., -1:] - G).exp()[..., None]
    chunk_decay = G[..., -1].exp()

    o = torch.empty_like(v)
    for n in range(N):
        u = U[:, :, n] - W[:, :, n] @ S
        o[:, :, n] = q_decayed[:, :, n] @ S + QK[:, :, n] @ u
        S = chunk_decay[:, :, n, None, None] * S + k_to_end[:, :, n].transpose(-1, -2) @ u
    o = o.reshape(B, HV, N * C, V)[:, :, :T]
    return o.transpose(1, 2).to(out_dtype), (S if output_final_state else None)
