"""Next-token cross entropy from the final hidden states, the vocabulary projection applied a chunk
of positions at a time.

At Titan-Llama's size (16,384 positions x Llama-3's 128,256 tokens) the logits of a whole sequence
are 8 GiB in fp32 per sequence, and autograd would keep them (and their gradient) until the
backward. Here each chunk's logits are formed, reduced to a sum of NLL and a count of hits, and
dropped; under autograd the chunk is checkpointed, so the backward recomputes its logits instead of
keeping them. The largest tensor is then [B, chunk, vocab], not [B, T, vocab]. A chunk without a
supervised target is never projected (an SFT sequence scores a few answer tokens after thousands of
context tokens). The authors' code does the same (titan_llama.py, `lm_logit_chunk_size`=512,
checkpointed chunks, all-ignored chunks skipped).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

IGNORE = -100
LOSS_CHUNK = 512  # positions per projection (the authors' lm_logit_chunk_size)


def _chunk_terms(hidden: torch.Tensor, head, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(sum of NLL, number of argmax hits) of one chunk; its logits live only inside this call."""
    logits = head(hidden).float()
    nll = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE, reduction="sum")
    with torch.no_grad():
        hits = ((logits.argmax(-1) == targets) & (targets != IGNORE)).sum()
    return nll, hits


def next_token_loss(hidden: torch.Tensor, head, labels: torch.Tensor,
                    chunk: int = LOSS_CHUNK) -> tuple[torch.Tensor, float]:
    """(mean cross entropy of position t's prediction against labels[:, t + 1] over the supervised
    targets, the share of them the argmax over the whole vocabulary gets right).

    hidden [B, T, D]: the final-normed hidden states (`backbone.train_hidden`); head: the LM head
    (D -> vocab); labels [B, T] with IGNORE where nothing is scored."""
    hidden, targets = hidden[:, :-1], labels[:, 1:]
    count = (targets != IGNORE).sum()
    if count == 0:
        return hidden.sum() * 0.0, 0.0
    total = hidden.new_zeros((), dtype=torch.float32)
    hits = torch.zeros((), dtype=torch.long, device=hidden.device)
    length = targets.shape[1]
    chunks = -(-length // chunk)
    scored = F.pad((targets != IGNORE).any(0), (0, chunks * chunk - length))
    active = scored.view(chunks, chunk).any(1).tolist()  # one transfer, not one per chunk
    for i, s in enumerate(range(0, length, chunk)):
        if not active[i]:
            continue
        h, y = hidden[:, s:s + chunk], targets[:, s:s + chunk]
        if torch.is_grad_enabled() and h.requires_grad:
            nll, n = checkpoint(_chunk_terms, h, head, y, use_reentrant=False)
        else:
            nll, n = _chunk_terms(h, head, y)
        total, hits = total + nll, hits + n
    return total / count, hits.item() / count.item()
