"""Observers that reduce a backbone's native keys and queries on the fly.

The backbone hands each recurrent layer's unit keys and queries [T, H, d_k] to the observer,
piece by piece. NoteBank keeps only what it needs: per chunk, the per-channel key
distinctiveness [C, J] and the compacted queries [C, J, d_rho]; for a question, its
compacted queries. No full-context feature tensor is ever held.
"""

from __future__ import annotations

import torch

from memexp.kernels import distinctiveness
from memexp.methods.notebank.addresses import AddressCompactor, ChannelLayout


class ChunkFeatures:
    """Observer for one write chunk of `length` tokens (one `Backbone.forward` call).

    Distinctiveness needs the mean key of the whole chunk, so a layer's keys are kept only
    until the layer has delivered all `length` positions (at once when the backbone does not
    split the chunk), then reduced to scores and dropped."""

    def __init__(self, layout: ChannelLayout, compactor: AddressCompactor, length: int, device: torch.device) -> None:
        self.layout, self.compactor, self.length = layout, compactor, length
        self.scores = torch.zeros(length, layout.size, dtype=torch.float32, device=device)  # [C, J]
        self.queries: torch.Tensor | None = None  # [C, J, d_rho], allocated in the features' dtype
        self._pending: dict[int, list[torch.Tensor]] = {}
        self._seen: dict[int, int] = {}

    def __call__(self, layer: int, start: int, keys: torch.Tensor, queries: torch.Tensor) -> None:
        if layer not in self.layout.slots:  # a layer outside method.layers
            return
        slots = self.layout.slots[layer]
        t = keys.shape[0]
        compact = self.compactor(layer, queries)
        if self.queries is None:
            self.queries = torch.empty(self.length, self.layout.size, compact.shape[-1], dtype=compact.dtype,
                                       device=compact.device)
        self.queries[start : start + t, slots] = compact
        if start == 0 and t == self.length:
            self.scores[:, slots] = distinctiveness.chunk_distinctiveness(keys)
            self._seen[layer] = t
            return
        self._pending.setdefault(layer, []).append(keys.clone())  # the backbone may reuse its buffer
        self._seen[layer] = self._seen.get(layer, 0) + t
        if self._seen[layer] == self.length:
            self.scores[:, slots] = distinctiveness.chunk_distinctiveness(torch.cat(self._pending.pop(layer)))

    def complete(self) -> bool:
        """Every layer of the layout delivered every position of the chunk."""
        return not self._pending and all(self._seen.get(layer) == self.length for layer in self.layout.slots)


class QuestionQueries:
    """Observer for the question probe: the compacted native queries [Tq, J, d_rho] in fp32.
    Only the stored addresses are bf16 (storage); the question side is transient and keeps
    full precision for the fp32 cosine scores."""

    def __init__(self, layout: ChannelLayout, compactor: AddressCompactor, length: int, device: torch.device) -> None:
        self.layout, self.compactor = layout, compactor
        self.queries = torch.zeros(length, layout.size, compactor.dim, dtype=torch.float32, device=device)

    def __call__(self, layer: int, start: int, keys: torch.Tensor, queries: torch.Tensor) -> None:
        if layer not in self.layout.slots:  # a layer outside method.layers
            return
        t = queries.shape[0]
        self.queries[start : start + t, self.layout.slots[layer]] = self.compactor(layer, queries).float()
