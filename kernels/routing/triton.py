"""Triton kernels for NoteBank's native router (NoteBank paper, Eq. 5); same contract as
`route_votes_reference`.

Two launches: `_note_scores_kernel` fills scores [Ch, N] with one program per (channel, block of
notes), looping over the question in blocks; `_channel_vote_kernel` scans one channel's row for
the first maximum and adds its vote. Everything is computed in fp32 (the interpreter's bf16
`tl.dot` is wrong, and an exact fp32 product keeps near-ties where the reference puts them).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

_EPS = 1e-12  # torch.nn.functional.normalize's default


@triton.jit
def _note_scores_kernel(
    a_ptr, q_ptr, s_ptr,
    N, T, D,
    stride_an, stride_ac, stride_ad,
    stride_qt, stride_qc, stride_qd,
    stride_sc, stride_sn,
    EPS: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
):
    c = tl.program_id(0)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    mask_n = offs_n < N
    mask_d = offs_d < D

    a = tl.load(a_ptr + offs_n[:, None] * stride_an + c * stride_ac + offs_d[None, :] * stride_ad,
                mask=mask_n[:, None] & mask_d[None, :], other=0.0).to(tl.float32)
    a = a / tl.maximum(tl.sqrt(tl.sum(a * a, axis=1)), EPS)[:, None]

    best = tl.full([BLOCK_N], float("-inf"), tl.float32)
    for t0 in range(0, T, BLOCK_T):
        offs_t = t0 + tl.arange(0, BLOCK_T)
        mask_t = offs_t < T
        q = tl.load(q_ptr + offs_t[:, None] * stride_qt + c * stride_qc + offs_d[None, :] * stride_qd,
                    mask=mask_t[:, None] & mask_d[None, :], other=0.0).to(tl.float32)
        q = q / tl.maximum(tl.sqrt(tl.sum(q * q, axis=1)), EPS)[:, None]
        sims = tl.dot(a, tl.trans(q), input_precision="ieee")  # [BLOCK_N, BLOCK_T]
        sims = tl.where(mask_t[None, :], sims, float("-inf"))
        best = tl.maximum(best, tl.max(sims, axis=1))

    tl.store(s_ptr + c * stride_sc + offs_n * stride_sn, best, mask=mask_n)


@triton.jit
def _channel_vote_kernel(
    s_ptr, best_ptr, votes_ptr,
    N,
    stride_sc, stride_sn,
    BLOCK_N: tl.constexpr,
):
    c = tl.program_id(0)
    lane = tl.arange(0, BLOCK_N)
    # Each lane keeps the first index where its own running maximum was reached (strict >),
    # so the smallest index among lanes holding the global maximum is the first argmax.
    lane_max = tl.full([BLOCK_N], float("-inf"), tl.float32)
    lane_arg = tl.zeros([BLOCK_N], tl.int32) + N
    for n0 in range(0, N, BLOCK_N):
        offs = n0 + lane
        s = tl.load(s_ptr + c * stride_sc + offs * stride_sn, mask=offs < N, other=float("-inf"))
        take = s > lane_max
        lane_arg = tl.where(take, offs, lane_arg)
        lane_max = tl.where(take, s, lane_max)
    top = tl.max(lane_max, axis=0)
    arg = tl.min(tl.where(lane_max == top, lane_arg, N), axis=0)
    tl.store(best_ptr + c, arg)
    tl.atomic_add(votes_ptr + arg, 1)


def route_votes_triton(addresses: torch.Tensor, queries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Kernel version of `route_votes_reference`.

    Args:
        addresses: [N, Ch, d] note addresses (any float dtype, any strides), N >= 1.
        queries: [Tq, Ch, d] the question's compacted native queries, Tq >= 1.
    Returns:
        votes [N] int64, best [Ch] int64 (ties to the lowest note index), scores [Ch, N] fp32.
    """
    n, ch, d = addresses.shape
    t, ch_q, d_q = queries.shape
    if (ch_q, d_q) != (ch, d):
        raise ValueError(f"addresses {tuple(addresses.shape)} and queries {tuple(queries.shape)} disagree on (Ch, d)")
    if n == 0 or t == 0:
        raise ValueError("routing needs at least one note and one question position")
    scores = torch.empty(ch, n, device=addresses.device, dtype=torch.float32)

    block_d = max(16, triton.next_power_of_2(d))
    block_n = 64 if block_d <= 64 else 32
    block_t = 16  # tl.dot needs >= 16 on every side; padded question rows score -inf
    _note_scores_kernel[(ch, triton.cdiv(n, block_n))](
        addresses, queries, scores,
        n, t, d,
        *addresses.stride(), *queries.stride(), *scores.stride(),
        EPS=_EPS, BLOCK_N=block_n, BLOCK_T=block_t, BLOCK_D=block_d,
    )
    votes, best = channel_votes_triton(scores)
    return votes, best, scores


def channel_votes_triton(scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One vote per channel for its first maximum: scores [Ch, N] fp32 -> votes [N] int64, best
    [Ch] int64 (exact ties go to the lowest note index)."""
    ch, n = scores.shape
    best = torch.empty(ch, device=scores.device, dtype=torch.int32)
    votes = torch.zeros(n, device=scores.device, dtype=torch.int32)
    _channel_vote_kernel[(ch,)](
        scores, best, votes, n, *scores.stride(),
        BLOCK_N=min(256, triton.next_power_of_2(n)),
    )
    return votes.long(), best.long()
