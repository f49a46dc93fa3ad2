"""NoteBank's readout: replay the routed notes, then the question, then answer (paper Eq. 6,
App. B.4).

Runs on its own copy of the retained state. An optional rescale lambda is applied right
before replay (lambda = 0 is the clean-start reset used for Mamba-2; conv windows, caches and
positions are kept). Positions continue from the context. How notes are joined to each other
and to the question is part of the config, because small models are sensitive to it.
"""

from __future__ import annotations

from memexp.backbones.base import Backbone, State, Stopwatch
from memexp.core.types import Question
from memexp.methods.notebank.archive import Archive
from memexp.methods.rescale import apply_rescale


def replay_sequence(archive: Archive, notes: list[int], separator: list[int], suffix: list[int]) -> list[int]:
    """The notes' original ids joined by `separator`, followed by `suffix`; empty without notes."""
    if not notes:
        return []
    out: list[int] = []
    for k, i in enumerate(notes):
        if k:
            out.extend(separator)
        out.extend(archive.note_ids(i))
    return out + suffix


def read_out(backbone: Backbone, state: State, replay: list[int], question_ids: list[int], question: Question,
             stop: list[int] | None, rescale: float | None, watch: Stopwatch) -> list[int]:
    """Advance `state` (a copy) over the replay and the question; return the greedy answer."""
    with watch.stage("replay"):
        apply_rescale(state, rescale)
        if replay:
            backbone.forward(state, replay)
    with watch.stage("generate"):
        return backbone.generate(state, question_ids, question.max_new_tokens, stop, question.min_new_tokens)
