"""NoteBank's archive: the notes written while reading a context (paper Eq. 2, App. C.7).

Per note: its original token ids, its span (write chunk, start, end) and one address per
channel. Addresses live on the backbone's device in bf16, unnormalised; token ids (int32)
and span metadata (three int64 per note) live on the host. Those are exactly the tensors
counted by the storage accounting: 2*N*J*d_rho device bytes, 4*U + 24*N host bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from memexp.backbones.base import Tokenizer


@dataclass(eq=False)
class Archive:
    addresses: torch.Tensor  # [N, J, d_rho] bf16, device
    token_ids: torch.Tensor  # [U] int32, host: the notes' ids back to back in writing order
    spans: torch.Tensor  # [N, 3] int64, host: (write chunk, start, end) in context positions
    derived: dict[str, Any] = field(default_factory=dict, repr=False)  # per-archive caches (decoded texts, BM25 index)

    def __len__(self) -> int:
        return self.spans.shape[0]

    @property
    def starts(self) -> torch.Tensor:
        return self.spans[:, 1]

    @property
    def lengths(self) -> torch.Tensor:
        return self.spans[:, 2] - self.spans[:, 1]

    def note_ids(self, i: int) -> list[int]:
        offset = int(self.lengths[:i].sum())
        return self.token_ids[offset : offset + int(self.lengths[i])].tolist()

    def texts(self, tokenizer: Tokenizer) -> list[str]:
        """Each note's decoded text, decoded once per archive."""
        if "texts" not in self.derived:
            pieces = torch.split(self.token_ids, self.lengths.tolist())
            self.derived["texts"] = [tokenizer.decode(p.tolist()) for p in pieces]
        return self.derived["texts"]

    def nbytes(self) -> dict[str, int]:
        """Persistent bytes: addresses on the device; token ids + span metadata on the host."""
        return {
            "addresses_device": self.addresses.numel() * self.addresses.element_size(),
            "host": self.token_ids.numel() * self.token_ids.element_size() + self.spans.numel() * self.spans.element_size(),
        }


class ArchiveBuilder:
    """Collects notes during the read, then packs them into an `Archive`."""

    def __init__(self, context_ids: torch.Tensor, channels: int, address_dim: int, device: torch.device) -> None:
        self.context_ids = context_ids
        self.channels, self.address_dim, self.device = channels, address_dim, device
        self._spans: list[tuple[int, int, int]] = []
        self._addresses: list[torch.Tensor] = []

    def add(self, chunk: int, start: int, end: int, address: torch.Tensor) -> None:
        """One note over context positions [start, end) with its [J, d_rho] address."""
        self._spans.append((chunk, start, end))
        self._addresses.append(address.to(torch.bfloat16))

    def __len__(self) -> int:
        return len(self._spans)

    def build(self) -> Archive:
        if not self._spans:
            addresses = torch.zeros(0, self.channels, self.address_dim, dtype=torch.bfloat16, device=self.device)
            return Archive(addresses, torch.zeros(0, dtype=torch.int32), torch.zeros(0, 3, dtype=torch.int64))
        spans = torch.tensor(self._spans, dtype=torch.int64)
        token_ids = torch.cat([self.context_ids[s:e] for _, s, e in self._spans]).to(torch.int32)
        return Archive(torch.stack(self._addresses), token_ids, spans)
