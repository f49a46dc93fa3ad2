"""Fast CPU path for NoteBank's native router (NoteBank paper, Eq. 5); same contract as
`route_votes_reference`, computed in fp32 (scores agree to ~1e-7 relative RMS).

Three changes against the reference, which normalises the whole bank and materialises the
[Ch, N, Tq] similarities (~200 MB at 4,096 notes x 192 channels x 64 question tokens):

- The address norm moves out of the max: max_t <a/|a|, q_t> = max_t <a, q_t> / |a| because
  1/|a| > 0, so the bank is never rewritten normalised; only its norms are taken, and the
  division touches [Ch, N] instead of [N, Ch, d].
- Channels and notes go in tiles whose similarities [cb, nb, Tq] stay in L3 (a few MB). Each tile
  converts its addresses to fp32 channel-major, so every channel is one contiguous [nb, d]
  matrix that the batched GEMM reads as is (strided address views make MKL slower), and
  reduces the max over the question before the next tile overwrites the buffer.
- `torch.argmax` already returns the first maximal index, which is the tie rule.

Threads are torch's intra-op threads as the caller set them; nothing global is changed. With
several threads, every op of every tile is an OpenMP parallel region: while another process
keeps a core busy, each region can wait a scheduler slice for its second thread (~8 ms measured
on the 2-core EPYC, ~1 s per call), so one thread is then much faster.
"""

from __future__ import annotations

import torch

_EPS = 1e-12  # torch.nn.functional.normalize's default, as in the reference
# fp32 addresses + similarities of one tile (6 channels of 4,096 notes at d=16, Tq=64). On the
# 2-core EPYC, 4-8 MB tie on one thread; smaller tiles pay per-op overhead (4 ops per tile) and
# larger ones fall out of cache. 8 MB halves the parallel regions of 4 MB (see above).
TILE_BYTES = 8 << 20


def route_votes_cpu(
    addresses: torch.Tensor, queries: torch.Tensor, tile_bytes: int = TILE_BYTES
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Tiled version of `route_votes_reference` for CPU tensors.

    Args:
        addresses: [N, Ch, d] note addresses (any float dtype, any strides), N >= 1.
        queries: [Tq, Ch, d] the question's compacted native queries, Tq >= 1.
        tile_bytes: working-set budget of one tile (fp32 addresses + similarities).
    Returns:
        votes [N] int64, best [Ch] int64 (ties to the lowest note index), scores [Ch, N] fp32.
    """
    n, ch, d = addresses.shape
    t, ch_q, d_q = queries.shape
    if (ch_q, d_q) != (ch, d):
        raise ValueError(f"addresses {tuple(addresses.shape)} and queries {tuple(queries.shape)} disagree on (Ch, d)")
    if n == 0 or t == 0:
        raise ValueError("routing needs at least one note and one question position")

    q = torch.nn.functional.normalize(queries.float(), dim=-1, eps=_EPS).permute(1, 2, 0).contiguous()  # [Ch, d, Tq]
    nb, cb = _tile_shape(n, ch, d, t, tile_bytes)
    f32 = {"dtype": torch.float32, "device": addresses.device}
    scores = torch.empty(ch, n, **f32)
    norms = torch.empty(ch, n, **f32)
    a_buf = torch.empty(cb * nb * d, **f32)
    s_buf = torch.empty(cb * nb * t, **f32)
    for c0 in range(0, ch, cb):
        c1 = min(c0 + cb, ch)
        for n0 in range(0, n, nb):
            n1 = min(n0 + nb, n)
            # Views of the flat buffers stay contiguous on the last (partial) tiles too.
            a = a_buf[: (c1 - c0) * (n1 - n0) * d].view(c1 - c0, n1 - n0, d)
            s = s_buf[: (c1 - c0) * (n1 - n0) * t].view(c1 - c0, n1 - n0, t)
            a.copy_(addresses[n0:n1, c0:c1].transpose(0, 1))
            torch.linalg.vector_norm(a, dim=-1, out=norms[c0:c1, n0:n1])
            torch.bmm(a, q[c0:c1], out=s)
            torch.amax(s, dim=-1, out=scores[c0:c1, n0:n1])
    scores.div_(norms.clamp_min_(_EPS))
    best = scores.argmax(dim=1)
    votes = torch.bincount(best, minlength=n)
    return votes, best, scores


def _tile_shape(n: int, ch: int, d: int, t: int, tile_bytes: int) -> tuple[int, int]:
    """(notes, channels) per tile: whole channels while one fits the budget, else note blocks
    of a single channel."""
    per_note = 4 * (d + t)  # fp32 address row + similarity row
    nb = max(1, min(n, tile_bytes // per_note))
    cb = max(1, min(ch, tile_bytes // (per_note * nb)))
    return nb, cb
