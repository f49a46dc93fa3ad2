"""NoteBank-TF (NoteBank paper, Algorithm 1): write notes while reading the context, route a
question to R of them with the backbone's own queries, replay them, then answer.

read:   prefill + write (`writer`)                                  -> stage "prefill_write"
answer: probe the question on a throwaway copy of the state         -> stage "probe"
        pick notes (`router`)                                       -> stage "route"
        replay the notes on another copy (`readout`)                -> stage "replay"
        read the question and generate                              -> stage "generate"
An empty archive means no probe and no replay. With `method.adapter` (NB-LoRA, App. B.4) the
read adapters are on for replay, question and generation only, so the archive, the probe and
the selected notes are NoteBank-TF's.
"""

from __future__ import annotations

import weakref
from typing import Sequence

from memexp.backbones.base import Backbone, State, Stopwatch, Tokenizer
from memexp.core.types import Question
from memexp.methods.base import Answer, Memory, Method
from memexp.methods.notebank.addresses import AddressCompactor, ChannelLayout, indexed_channels
from memexp.methods.notebank.archive import Archive
from memexp.methods.notebank.config import NoteBankConfig
from memexp.methods.notebank.features import QuestionQueries
from memexp.methods.notebank.readout import read_out, replay_sequence
from memexp.methods.notebank.router import RouteRequest, Selection, build_router
from memexp.methods.notebank.sentences import sentence_end_table
from memexp.methods.notebank.writer import WriterSpec, read_and_write
from memexp.methods.read_adapter import AdapterSlot


class NoteBank(Method[Archive]):
    name = "notebank"

    def __init__(self, cfg: NoteBankConfig | None = None) -> None:
        self.cfg = cfg or NoteBankConfig()
        self.router = build_router(self.cfg.router, self.cfg.replay_budget, self.cfg.router_seed, self.cfg.router_model,
                                   self.cfg.router_query_instruction)
        self._addressing: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._formats: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.adapter = AdapterSlot(self.cfg.adapter)

    def prepare(self, backbone: Backbone) -> None:
        self.adapter.prepare(backbone)
        self.addressing(backbone)  # an address width the backbone cannot give stops the run before it starts
        if hasattr(self.router, "prepare"):  # a router with its own encoder loads it now, not at the first question
            self.router.prepare(backbone.device, backbone.dtype)

    def addressing(self, backbone: Backbone) -> tuple[ChannelLayout, AddressCompactor]:
        """The backbone's channel layout and the fixed compaction shared by notes and questions."""
        if backbone not in self._addressing:
            layout = ChannelLayout(indexed_channels(backbone, self.cfg.layers), backbone.device)
            compactor = AddressCompactor(layout, self.cfg.address_dim, self.cfg.address_seed, backbone.device)
            self._addressing[backbone] = (layout, compactor)
        return self._addressing[backbone]

    def read(self, backbone: Backbone, context_ids: list[int]) -> Memory[Archive]:
        return self.read_shared(backbone, context_ids, [self])[0]

    @classmethod
    def read_shared(cls, backbone: Backbone, context_ids: list[int], methods: Sequence[NoteBank]) -> list[Memory[Archive]]:
        """One prefill pass writes every method's archive (their configs differ at most in
        NoteBank's writer and answer fields, config.py); each memory is what its method's own read
        gives, sharing one state and the pass's wall time."""
        watch = Stopwatch()
        writers = [WriterSpec(m.cfg, *m.addressing(backbone)) for m in methods]
        state = backbone.init_state()
        with watch.stage("prefill_write"):
            archives = read_and_write(backbone, state, context_ids, writers, sentence_end_table(backbone.tokenizer))
        return [method._memory(state, context_ids, archive, writer.compactor, dict(watch.seconds))
                for method, archive, writer in zip(methods, archives, writers)]

    def _memory(self, state: State, context_ids: list[int], archive: Archive, compactor: AddressCompactor,
                seconds: dict[str, float]) -> Memory[Archive]:
        stats = {
            "notes": len(archive),
            "archived_tokens": archive.token_ids.numel(),
            "write_chunks": len(context_ids) // self.cfg.chunk_size,
            "archive_bytes": archive.nbytes(),
            "address_index_bytes": compactor.nbytes(),
            # every written note's [chunk, start, end] (token positions in the context): what a
            # question could have been routed to, for the question view of `memexp browse`
            "written": archive.spans.tolist(),
        }
        return Memory(state=state, context_len=len(context_ids), seconds=seconds, stats=stats, extra=archive)

    def answer(self, backbone: Backbone, memory: Memory[Archive], question_ids: list[int], question: Question,
               stop: list[int] | None = None) -> Answer:
        watch = Stopwatch()
        archive = memory.extra
        question_ids = [int(i) for i in question_ids]
        selection, replay, probed = self.select(backbone, memory, question_ids, question, watch)
        state = memory.state.clone()
        with self.adapter.on(backbone):
            ids = read_out(backbone, state, replay, question_ids, question, stop, self.cfg.rescale, watch)
        selected = []
        for k, i in enumerate(selection.notes):
            chunk, start, end = archive.spans[i].tolist()
            # the note's text, so a per-question table shows what was replayed
            entry = {"note": i, "chunk": chunk, "start": start, "end": end,
                     "text": archive.texts(backbone.tokenizer)[i]}
            if selection.scores is not None and self.router.name == "native":
                entry["votes"] = int(selection.scores[k])
                if selection.voters is not None:  # which channels voted for it, as layer.head
                    channels = self.addressing(backbone)[0].channels
                    entry["channels"] = [f"L{channels[c].layer}.h{channels[c].head}" for c in selection.voters[k]]
            elif selection.scores is not None:
                entry["score"] = selection.scores[k]
            selected.append(entry)
        stats = {
            "router": self.router.name,
            "archive_notes": len(archive),
            "replay_tokens": len(replay),
            "replay_note_tokens": int(sum(e["end"] - e["start"] for e in selected)),
            "selected": selected,
            **selection.stats,
            **self.adapter.record(),
        }
        tokens = {"question": len(question_ids), "replay": len(replay), "probe": len(question_ids) if probed else 0,
                  "generated": len(ids)}
        return Answer(ids=ids, seconds=watch.seconds, stats=stats, tokens=tokens)

    def select(self, backbone: Backbone, memory: Memory[Archive], question_ids: list[int], question: Question,
               watch: Stopwatch) -> tuple[Selection, list[int], bool]:
        """(the routed notes, the replay ids, whether the question was probed): probe and route
        with the adapters off (NB-TF's exactly); also what `memexp train recipe=notebank_lora` replays."""
        archive = memory.extra
        probed = bool(len(archive) and question_ids and self.router.needs_probe)
        selection = Selection([], None)
        if probed:
            with watch.stage("probe"):
                queries = self._probe(backbone, memory, question_ids)
        if len(archive) and question_ids:
            with watch.stage("route"):
                request = RouteRequest(question, backbone.tokenizer, queries if probed else None, question_ids,
                                       backbone.input_embeddings)
                selection = self.router.route(archive, request)
        with watch.stage("replay"):
            replay = replay_sequence(archive, selection.notes, *self.replay_format(backbone.tokenizer))
        return selection, replay, probed

    def _probe(self, backbone: Backbone, memory: Memory[Archive], question_ids: list[int]):
        """The question's compacted native queries, read from a copy of the state that is then dropped."""
        layout, compactor = self.addressing(backbone)
        observer = QuestionQueries(layout, compactor, len(question_ids), backbone.device)
        backbone.forward(memory.state.clone(), question_ids, observer)
        return observer.queries

    def replay_format(self, tokenizer: Tokenizer) -> tuple[list[int], list[int]]:
        """(separator ids, suffix ids) in the backbone's tokenizer, encoded once per tokenizer."""
        if tokenizer not in self._formats:
            self._formats[tokenizer] = (tokenizer.encode(self.cfg.note_separator) if self.cfg.note_separator else [],
                                        tokenizer.encode(self.cfg.replay_suffix) if self.cfg.replay_suffix else [])
        return self._formats[tokenizer]
