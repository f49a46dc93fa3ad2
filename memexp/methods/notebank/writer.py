"""NoteBank's writer: reads the context chunk by chunk and archives notes before any question
is seen (paper Algorithm 1 step 1, Eq. 3-4, App. B.2-B.3).

The context is cut into chunks of C tokens, the state carried across them. For each
completed chunk the candidate region is the chunk plus the last `tail` tokens of the previous
chunk, whose scores and compacted queries are kept from their own chunk. Notes are chosen
from the channel-averaged distinctiveness (`span_selection`); each note's address takes, per
channel, the compacted query at that channel's most distinctive key inside the note. A final
incomplete chunk is read but writes nothing, unless `write_tail`: then it is written as a last,
shorter chunk (its distinctiveness measured against its own mean key).
"""

from __future__ import annotations

import torch

from memexp.backbones.base import Backbone, State, as_ids
from memexp.methods.notebank.addresses import AddressCompactor, ChannelLayout
from memexp.methods.notebank.archive import Archive, ArchiveBuilder
from memexp.methods.notebank.config import NoteBankConfig
from memexp.methods.notebank.features import ChunkFeatures
from memexp.methods.notebank.sentences import SentenceEndTable, sentence_ids
from memexp.methods.notebank.span_selection import select_spans


class NoteWriter:
    """Writes the notes of one context, fed one completed chunk's features at a time."""

    def __init__(self, cfg: NoteBankConfig, context_ids: torch.Tensor, sentence_ends: SentenceEndTable,
                 channels: int, address_dim: int, device: torch.device) -> None:
        self.cfg = cfg
        self.context_ids = context_ids
        self.sentence_ends = sentence_ends
        self.builder = ArchiveBuilder(context_ids, channels, address_dim, device)
        self._tail: tuple[torch.Tensor, torch.Tensor] | None = None

    def add_chunk(self, chunk: int, scores: torch.Tensor, queries: torch.Tensor) -> list[tuple[int, int]]:
        """Write the notes of completed chunk number `chunk` from its per-channel
        distinctiveness [C, J] and compacted queries [C, J, d_rho]; returns their context spans."""
        start = chunk * self.cfg.chunk_size
        end = start + scores.shape[0]
        if self._tail is not None:
            region_scores = torch.cat([self._tail[0], scores])
            region_queries = torch.cat([self._tail[1], queries])
        else:
            region_scores, region_queries = scores, queries
        origin = end - region_scores.shape[0]
        sentences = sentence_ids(self.sentence_ends(self.context_ids[origin:end]))
        spans = select_spans(region_scores.mean(dim=1).cpu(), sentences, self.cfg.window, self.cfg.span_budget,
                             self.cfg.write_budget)
        channel = torch.arange(region_scores.shape[1], device=region_scores.device)
        for s, e in spans:
            most_distinctive = s + representatives(region_scores[s:e])  # [J]
            self.builder.add(chunk, origin + s, origin + e, region_queries[most_distinctive, channel])
        keep = min(self.cfg.tail, scores.shape[0])
        self._tail = (scores[-keep:].clone(), queries[-keep:].clone()) if keep else None
        return [(origin + s, origin + e) for s, e in spans]

    def archive(self) -> Archive:
        return self.builder.build()


def representatives(scores: torch.Tensor) -> torch.Tensor:
    """Eq. 4's representative token of one note for every channel: the position (from the note's
    start) of the channel's most distinctive key. scores [n, J] -> [J], the first position on ties."""
    return scores.argmax(dim=0)


def read_and_write(backbone: Backbone, state: State, context_ids, cfg: NoteBankConfig, layout: ChannelLayout,
                   compactor: AddressCompactor, sentence_ends: SentenceEndTable) -> Archive:
    """Advance `state` over the whole context and return the archive written on the way."""
    ids = as_ids(context_ids)
    writer = NoteWriter(cfg, ids, sentence_ends, layout.size, compactor.dim, backbone.device)
    size = cfg.chunk_size
    full_chunks = len(ids) // size
    for chunk in range(full_chunks):
        features = ChunkFeatures(layout, compactor, size, backbone.device)
        backbone.forward(state, ids[chunk * size : (chunk + 1) * size].to(backbone.device), features)
        if not features.complete():
            raise RuntimeError(f"backbone {backbone.name!r} did not report keys and queries for every channel")
        writer.add_chunk(chunk, features.scores, features.queries)
    rest = len(ids) - full_chunks * size
    if rest and cfg.write_tail:
        features = ChunkFeatures(layout, compactor, rest, backbone.device)
        backbone.forward(state, ids[full_chunks * size :].to(backbone.device), features)
        if not features.complete():
            raise RuntimeError(f"backbone {backbone.name!r} did not report keys and queries for every channel")
        writer.add_chunk(full_chunks, features.scores, features.queries)
    elif rest:
        backbone.forward(state, ids[full_chunks * size :].to(backbone.device))
    return writer.archive()
