"""PyTorch reference for NoteBank's per-channel key distinctiveness (NoteBank paper, Eq. 3)."""

from __future__ import annotations

import torch


def chunk_distinctiveness_reference(keys: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Per-token, per-channel distinctiveness inside one chunk.

    Args:
        keys: [T, Ch, d_k] the chunk's native keys (re-normalised here, so unit or not).
    Returns:
        [T, Ch] fp32: 1 - <k_hat_t, normalise(mean_t k_hat_t)>.
    """
    k = torch.nn.functional.normalize(keys.float(), dim=-1, eps=eps)
    mu = torch.nn.functional.normalize(k.mean(dim=0, keepdim=True), dim=-1, eps=eps)
    return 1.0 - (k * mu).sum(dim=-1)
