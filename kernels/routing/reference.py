"""PyTorch reference for NoteBank's native router (NoteBank paper, Eq. 5)."""

from __future__ import annotations

import torch


def route_votes_reference(addresses: torch.Tensor, queries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Score every note for every channel and let each channel vote.

    Args:
        addresses: [N, Ch, d] note addresses (any float dtype, unnormalised).
        queries: [Tq, Ch, d] the question's compacted native queries (unnormalised).
    Returns:
        votes: [N] int64, how many channels chose each note;
        best: [Ch] int64, the note each channel chose (ties to the lowest index, i.e. the
            earlier-written note);
        scores: [Ch, N] fp32, s_i = max over question positions of the cosine.
    """
    a = torch.nn.functional.normalize(addresses.float(), dim=-1)
    q = torch.nn.functional.normalize(queries.float(), dim=-1)
    sims = torch.einsum("nch,tch->cnt", a, q)  # [Ch, N, Tq]
    scores = sims.amax(dim=-1)
    best = _first_argmax(scores)
    votes = torch.bincount(best, minlength=addresses.shape[0])
    return votes, best, scores


def _first_argmax(x: torch.Tensor) -> torch.Tensor:
    """Argmax over the last dim that breaks ties to the lowest index on every device."""
    top = x.amax(dim=-1, keepdim=True)
    idx = torch.arange(x.shape[-1], device=x.device).expand_as(x)
    return torch.where(x == top, idx, x.shape[-1]).amin(dim=-1)
