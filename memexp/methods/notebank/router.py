"""NoteBank's routers: which R notes a question replays (paper Eq. 5, Sec. 6.2 / Table 3).

- `native` (the paper's router): every channel scores every note by the max cosine between
  the note's address and the question's compacted queries, and votes for its best note; the
  R notes with the most votes win, ties to the earlier-written note.
- `random`: R notes drawn uniformly, seeded by `router_seed` and the question id (the same
  question gets the same notes whatever order questions come in).
- `bm25`: lexical BM25 over the notes' decoded text, the question prompt as the query.
- `embedding`: cosine between mean-pooled input embeddings (the backbone's own embedding
  table) of each note and of the question ids; the R best, ties to the earlier note. The
  paper's training-free semantic control (Table 3, "input embedding").
- `bge`: cosine between BGE encodings of each note's text and of the question prompt (the
  paper's external-encoder control, Tables 3 and 8; memexp.methods.notebank.bge_router).
- `oracle`: notes containing a reference answer (most distinct references first), a
  diagnostic upper bound on routing; possibly fewer than R, possibly none.
All keep the archive and the budget; the chosen notes are replayed in document order.
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass, field
from typing import Callable

import bm25s
import numpy as np
import torch

from memexp.backbones.base import Tokenizer
from memexp.core.registry import ROUTERS
from memexp.core.types import Question
from memexp.kernels import routing
from memexp.methods.notebank.archive import Archive

# bm25s sets its own logger to DEBUG on import, so any handler on the root logger (Hydra's
# job logging, a launcher's) prints "Building index ..." for every question's archive, into
# the progress bar; its warnings still come through.
logging.getLogger("bm25s").setLevel(logging.WARNING)


@dataclass
class RouteRequest:
    question: Question
    tokenizer: Tokenizer
    queries: torch.Tensor | None = None  # [Tq, J, d_rho] compacted question queries (native router only)
    question_ids: list[int] | None = None  # the question's token ids (embedding router)
    embed: Callable[[list[int]], torch.Tensor] | None = None  # ids -> input embeddings [T, D] (embedding router)


@dataclass
class Selection:
    notes: list[int]  # archive indices, in document order
    scores: list[float] | None  # the router's score of each selected note (votes for native), None for random
    voters: list[list[int]] | None = None  # native: the channels (layout indices) that voted for each selected note
    stats: dict = field(default_factory=dict)  # the router's own figures for the record (bge: encoding times)


def top_r(scores: torch.Tensor, r: int) -> list[int]:
    """Indices of the `r` highest scores; ties go to the lower index (the earlier note)."""
    order = torch.sort(scores.cpu(), descending=True, stable=True).indices
    return order[:r].tolist()


def document_order(archive: Archive, notes: list[int]) -> list[int]:
    """Notes sorted by their start position in the context (then by writing order)."""
    starts = archive.starts.tolist()
    return sorted(notes, key=lambda i: (starts[i], i))


def _selection(archive: Archive, picked: list[int], scores: torch.Tensor | None) -> Selection:
    notes = document_order(archive, picked)
    return Selection(notes, None if scores is None else [float(scores[i]) for i in notes])


class NativeRouter:
    needs_probe = True

    def __init__(self, replay_budget: int) -> None:
        self.replay_budget = replay_budget

    def route(self, archive: Archive, request: RouteRequest) -> Selection:
        votes, best, _ = routing.route_votes(archive.addresses, request.queries.to(archive.addresses.device))
        votes, best = votes.cpu(), best.cpu().tolist()
        selection = _selection(archive, top_r(votes, self.replay_budget), votes)
        selection.voters = [[c for c, note in enumerate(best) if note == i] for i in selection.notes]
        return selection


class RandomRouter:
    needs_probe = False

    def __init__(self, replay_budget: int, seed: int) -> None:
        self.replay_budget, self.seed = replay_budget, seed

    def route(self, archive: Archive, request: RouteRequest) -> Selection:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + zlib.crc32(request.question.id.encode()))
        picked = torch.randperm(len(archive), generator=generator)[: self.replay_budget].tolist()
        return _selection(archive, picked, None)


class BM25Router:
    needs_probe = False

    def __init__(self, replay_budget: int) -> None:
        self.replay_budget = replay_budget

    def route(self, archive: Archive, request: RouteRequest) -> Selection:
        retriever = self._index(archive, request.tokenizer)
        query = bm25s.tokenize(request.question.prompt, stopwords="en", return_ids=False, show_progress=False)[0]
        if retriever is None or not query:
            scores = torch.zeros(len(archive))
        else:
            scores = torch.from_numpy(np.asarray(retriever.get_scores(query), dtype=np.float64))
        return _selection(archive, top_r(scores, self.replay_budget), scores)

    @staticmethod
    def _index(archive: Archive, tokenizer: Tokenizer) -> bm25s.BM25 | None:
        """The archive's BM25 index, built once per archive (None when no note has a term)."""
        if "bm25" not in archive.derived:
            corpus = bm25s.tokenize(archive.texts(tokenizer), stopwords="en", show_progress=False)
            retriever = None
            if corpus.vocab:
                retriever = bm25s.BM25()
                retriever.index(corpus, show_progress=False)
            archive.derived["bm25"] = retriever
        return archive.derived["bm25"]


class EmbeddingRouter:
    needs_probe = False

    def __init__(self, replay_budget: int) -> None:
        self.replay_budget = replay_budget

    def route(self, archive: Archive, request: RouteRequest) -> Selection:
        notes = self._note_vectors(archive, request.embed)
        question = request.embed(request.question_ids).float().mean(0)
        scores = torch.nn.functional.cosine_similarity(notes, question.to(notes.device)[None], dim=-1).cpu()
        return _selection(archive, top_r(scores, self.replay_budget), scores)

    @staticmethod
    def _note_vectors(archive: Archive, embed) -> torch.Tensor:
        """Each note's mean input embedding [N, D] in fp32, computed once per archive."""
        if "embedding" not in archive.derived:
            rows = embed(archive.token_ids.long().tolist()).float()
            owner = torch.repeat_interleave(torch.arange(len(archive)), archive.lengths.long()).to(rows.device)
            sums = torch.zeros(len(archive), rows.shape[1], device=rows.device).index_add_(0, owner, rows)
            archive.derived["embedding"] = sums / archive.lengths.to(rows.device, torch.float32)[:, None]
        return archive.derived["embedding"]


class OracleRouter:
    needs_probe = False

    def __init__(self, replay_budget: int) -> None:
        self.replay_budget = replay_budget

    def route(self, archive: Archive, request: RouteRequest) -> Selection:
        references = {r.strip().lower() for r in request.question.references if r.strip()}
        texts = [t.lower() for t in archive.texts(request.tokenizer)]
        counts = torch.tensor([float(sum(r in t for r in references)) for t in texts])
        picked = [i for i in top_r(counts, self.replay_budget) if counts[i] > 0] if len(texts) else []
        return _selection(archive, picked, counts)


def build_router(name: str, replay_budget: int, seed: int, encoder: str | None = None,
                 query_instruction: str | None = None):
    """The router registered as `name` in memexp.core.registry.ROUTERS (see memexp/methods/notebank/routers.py);
    `encoder` is the model a router with an external encoder loads (`method.router_model`), and
    `query_instruction` what it puts before the question (`method.router_query_instruction`; None: its own default)."""
    entry = ROUTERS.get(name)
    cls = entry.load()
    if entry.meta.get("seeded"):
        router = cls(replay_budget, seed)
    elif entry.meta.get("encoder"):
        given = {} if query_instruction is None else {"query_instruction": query_instruction}
        router = cls(replay_budget, encoder, **given)
    else:
        router = cls(replay_budget)
    router.name = entry.name  # what records and the native-score report read
    return router
