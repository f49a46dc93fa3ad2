"""The GDN-2 rule: Gated DeltaNet-2's recurrence with separate channel-wise erase and write
gates and a per-channel decay, in recurrent and chunked form.

Per head, with state S [K, V], per token t (g_t, b_t in R^K; w_t in R^V):

    S   <- Diag(exp(g_t)) S                        per-channel decay
    u_t  = w_t * v_t - S^T (b_t * k_t)             write minus what the erase gate reads
    S   <- S + k_t u_t^T                           rank-one write
    o_t  = S^T (scale * q_t)                       readout

i.e. S_t = (I - k_t (b_t * k_t)^T) Diag(exp g_t) S_{t-1} + k_t (w_t * v_t)^T. With
b = w = beta this is KDA; with a scalar g as well, the gated delta rule.

This file holds the two reference forms (fp32, plain PyTorch); `memexp.kernels.gdn2_rule`
dispatches to FLA's kernels or to them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from memexp.kernels.recurrence import fp32_state

CHUNK = 32  # the chunked reference holds [C, C, K] pair decays per head: keep C small


def _heads_first(q, k, v, g, b, w, scale):
    """fp32, [B, H, T, *] layout, q pre-scaled."""
    if scale is None:
        scale = q.shape[-1] ** -0.5
    q = q.float() * scale
    return tuple(x.float().transpose(1, 2) for x in (q, k, v, g, b, w))


def recurrent_gdn2_ref(q, k, v, g, b, w, scale=None, initial_state=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-by-token reference in fp32; shapes as in `gdn2_rule`."""
    out_dtype = v.dtype
    q, k, v, g, b, w = _heads_first(q, k, v, g, b, w, scale)
    B, H, T, K = k.shape
    V = v.shape[-1]
    S = fp32_state(initial_state, (B, H, K, V), q.device)
    o = v.new_empty(B, H, T, V)
    for t in range(T):
        S = S * g[:, :, t].exp()[..., None]
        u = w[:, :, t] * v[:, :, t] - torch.einsum("bhk,bhkv->bhv", b[:, :, t] * k[:, :, t], S)
        S = S + k[:, :, t, :, None] * u[:, :, None, :]
        o[:, :, t] = torch.einsum("bhk,bhkv->bhv", q[:, :, t], S)
    return o.transpose(1, 2).to(out_dtype), S


def chunk_gdn2_ref(q, k, v, g, b, w, scale=None, initial_state=None, chunk_size: int = CHUNK):
    """Chunked reference in fp32 (WY representation, one chunk at a time).

    Within a chunk, with G_t the cumulative per-channel log-decay since the chunk start and
    S0 the state entering it, the writes solve a unit lower-triangular system

        (I + L) u = w * v - (b * k * exp(G)) S0,   L_tj = sum_d b_td k_td k_jd exp(G_td - G_jd)  (j < t)

    and then

        o_t = (q_t * exp(G_t)) S0 + sum_{j<=t} sum_d q_td k_jd exp(G_td - G_jd) u_j
        S   = Diag(exp(G_C)) S0 + sum_j (k_j * exp(G_C - G_j)) u_j^T

    Pair decays are formed per channel as exp of differences (never exp(-G) alone, which
    overflows under strong decay), so memory is O(C^2 K) per head for the current chunk.
    The sequence is zero-padded to whole chunks (k = w = g = 0 leaves S unchanged).
    """
    out_dtype = v.dtype
    q, k, v, g, b, w = _heads_first(q, k, v, g, b, w, scale)
    B, H, T, K = k.shape
    V = v.shape[-1]
    S = fp32_state(initial_state, (B, H, K, V), q.device)
    C = chunk_size
    pad = (-T) % C
    if pad:
        q, k, v, g, b, w = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v, g, b, w))
    strict = torch.ones(C, C, dtype=torch.bool, device=q.device).tril(-1)
    causal = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    eye = torch.eye(C, dtype=torch.float32, device=q.device)
    o = torch.empty_like(v)
    for s in range(0, T + pad, C):
        qc, kc, vc, gc, bc, wc = (x[:, :, s : s + C] for x in (q, k, v, g, b, w))
        G = gc.cumsum(2)
        pair = (G[:, :, :, None, :] - G[:, :, None, :, :]).masked_fill(~causal[..., None], float("-inf")).exp()
        L = torch.einsum("bhtd,bhjd,bhtjd->bhtj", bc * kc, kc, pair) * strict
        A = L + eye
        u = torch.linalg.solve_triangular(A, wc * vc - (bc * kc * G.exp()) @ S, upper=False, unitriangular=True)
        scores = torch.einsum("bhtd,bhjd,bhtjd->bhtj", qc, kc, pair)
        o[:, :, s : s + C] = (qc * G.exp()) @ S + scores @ u
        S = G[:, :, -1, :, None].exp() * S + (kc * (G[:, :, -1:] - G).exp()).transpose(-1, -2) @ u
    return o[:, :, :T].transpose(1, 2).to(out_dtype), S
