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

from dataclasses import dataclass
from typing import Sequence

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


@dataclass
class WriterSpec:
    """One writer's settings: its config and the addressing its channels use."""

    cfg: NoteBankConfig
    layout: ChannelLayout
    compactor: AddressCompactor


def read_and_write(backbone: Backbone, state: State, context_ids, writers: Sequence[WriterSpec],
                   sentence_ends: SentenceEndTable) -> list[Archive]:
    """Advance `state` over the whole context and return each writer's archive, written on the way.

    One pass serves every writer: they share the chunk size (it cuts the backbone's forward
    calls), and each reduces the keys and queries the pass exposes with its own layout,
    compactor and budgets (memexp.methods.read_identity: NoteBank's writer fields), so each
    archive is the one its writer builds alone."""
    ids = as_ids(context_ids)
    size = writers[0].cfg.chunk_size
    if any(w.cfg.chunk_size != size for w in writers):
        raise ValueError("writers that share a pass share method.chunk_size")
    notes = [NoteWriter(w.cfg, ids, sentence_ends, w.layout.size, w.compactor.dim, backbone.device) for w in writers]
    full_chunks = len(ids) // size
    for chunk in range(full_chunks):
        _write_chunk(backbone, state, ids[chunk * size : (chunk + 1) * size], chunk, writers, notes)
    rest = len(ids) - full_chunks * size
    if rest:
        tail = [i for i, w in enumerate(writers) if w.cfg.write_tail]
        _write_chunk(backbone, state, ids[full_chunks * size :], full_chunks, [writers[i] for i in tail],
                     [notes[i] for i in tail])
    return [writer.archive() for writer in notes]


def _write_chunk(backbone: Backbone, state: State, ids: torch.Tensor, chunk: int, writers: Sequence[WriterSpec],
                 notes: Sequence[NoteWriter]) -> None:
    """One forward call over `ids` (chunk number `chunk`) whose features feed each of `writers`
    (none: the pass only advances the state)."""
    features = [ChunkFeatures(w.layout, w.compactor, len(ids), backbone.device) for w in writers]

    def observe(layer: int, start: int, keys: torch.Tensor, queries: torch.Tensor) -> None:
        for f in features:
            f(layer, start, keys, queries)

    backbone.forward(state, ids.to(backbone.device), observe if features else None)
    for f, writer in zip(features, notes):
        if not f.complete():
            raise RuntimeError(f"backbone {backbone.name!r} did not report keys and queries for every channel")
        writer.add_chunk(chunk, f.scores, f.queries)
