"""How a method reads a context once and answers many questions from it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Generic, Sequence, TypeVar

from memexp.backbones.base import Backbone, State
from memexp.core.types import Question

P = TypeVar("P")  # a method's private payload in Memory.extra


@dataclass
class Memory(Generic[P]):
    """What `Method.read` retains: the state after the context plus the method's own payload
    (`extra`: None for Plain, the context ids for JRT, the note archive for NoteBank).
    `answer` never mutates it (it works on clones)."""

    state: State
    context_len: int
    seconds: dict[str, float] = field(default_factory=dict)  # per-stage wall time of read
    stats: dict[str, Any] = field(default_factory=dict)  # JSON-serialisable method figures
    extra: P = field(kw_only=True)


@dataclass
class Answer:
    ids: list[int]  # generated token ids
    seconds: dict[str, float] = field(default_factory=dict)  # per-stage wall time
    stats: dict[str, Any] = field(default_factory=dict)  # JSON-serialisable method figures
    tokens: dict[str, int] = field(default_factory=dict)  # tokens read per kind: question, replay, ...


class Method(ABC, Generic[P]):
    """A memory method. `read` sees only the context; `answer` one question at a time; the
    payload type `P` is what `read` keeps in `Memory.extra` for `answer`."""

    name: str

    def prepare(self, backbone: Backbone) -> None:
        """Called once with the loaded backbone, before any example is read: a method that
        changes how the backbone computes installs its layers or adapters here (and may load
        its own weights). Most methods read the backbone as it is and do nothing."""

    @abstractmethod
    def read(self, backbone: Backbone, context_ids: list[int]) -> Memory[P]:
        """Read the context once (ids include BOS when the tokenizer has one)."""

    @classmethod
    def read_shared(cls, backbone: Backbone, context_ids: list[int], methods: Sequence[Method[P]]) -> list[Memory[P]]:
        """Read the context for several methods of this class whose configurations differ only in
        fields the class registers as `writer_fields` (memexp.methods.read_identity): each memory
        must equal what that method's own `read` returns, whatever it shares. A class with
        writer fields overrides this to feed every writer from one backbone pass; this default
        reads once per method. The memories may share one state object: `answer` never mutates it."""
        return [method.read(backbone, context_ids) for method in methods]

    @abstractmethod
    def answer(
        self,
        backbone: Backbone,
        memory: Memory[P],
        question_ids: list[int],
        question: Question,
        stop: list[int] | None = None,
    ) -> Answer:
        """Answer one question from a copy of `memory.state`; `memory` stays unchanged.
        Generates at most `question.max_new_tokens` tokens greedily; `stop` as in
        `Backbone.generate`."""
