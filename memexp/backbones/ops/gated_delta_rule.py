"""The gated delta rule: Gated DeltaNet's recurrence, in recurrent and chunked (WY/UT) form.

Per value head, with state S [K, V] (memexp and FLA's default layout), per token t:

    S   <- exp(g_t) * S                          decay
    u_t  = beta_t * (v_t - S^T k_t)              delta-rule correction (the "new value")
    S   <- S + k_t u_t^T                         rank-one write
    o_t  = S^T (scale * q_t)                     readout

Grouped value heads: with HV = G * H value heads, value head j reads query/key head j // G
(FLA's GVA mapping, and Qwen3.5's repeat_interleave).

`gated_delta_rule` is the entry point: FLA's kernels for CUDA tensors when memexp.kernels.dispatch
allows them, the reference forms below everywhere else.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from memexp.backbones.ops.l2norm import l2_norm
from memexp.backbones.ops.reference import fp32_state, reference_form
from memexp.kernels.dispatch import use_kernels

CHUNK = 64
RECURRENT_MAX_T = 8  # below this the per-token loop is cheaper than one padded chunk
FLA_RECURRENT_MAX_T = 64  # FLA's own switch from chunk to fused_recurrent at inference


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
            picks FLA's fused_recurrent kernel for T <= 64 and the chunk kernel above.
    Returns:
        o: [B, T, HV, V] in v's dtype; final state [B, HV, K, V] fp32 (None unless asked).
    """
    if use_kernels(v, "fla"):
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule

        # fused_recurrent has no backward: training always takes the chunk kernel (as FLA's layer does)
        needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v, g, beta))
        short = q.shape[1] <= FLA_RECURRENT_MAX_T and not needs_grad
        kernel = fused_recurrent_gated_delta_rule if short else chunk_gated_delta_rule
        h0 = None if initial_state is None else initial_state.float().contiguous()
        return kernel(
            q=q,
            k=k,
            v=v,
            g=g.float(),
            beta=beta.to(v.dtype),
            scale=scale,
            initial_state=h0,
            output_final_state=output_final_state,
            use_qk_l2norm_in_kernel=use_qk_l2norm,
        )
    if use_qk_l2norm:
        q, k = l2_norm(q), l2_norm(k)
    if reference_form(form, q.shape[1], RECURRENT_MAX_T) == "recurrent":
        return recurrent_gated_delta_rule_ref(q, k, v, g, beta, scale, initial_state, output_final_state)
    return chunk_gated_delta_rule_ref(q, k, v, g, beta, scale, initial_state, output_final_state)


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
