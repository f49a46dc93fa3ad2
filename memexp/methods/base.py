"""How a method reads a context once and answers many questions from it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from memexp.backbones.base import Backbone, State
from memexp.benchmarks.base import Question


@dataclass
class Memory:
    """What `Method.read` retains: the state after the context plus anything the method
    archived. `answer` never mutates it (it works on clones)."""

    state: State
    context_len: int
    seconds: dict[str, float] = field(default_factory=dict)  # per-stage wall time of read
    stats: dict[str, Any] = field(default_factory=dict)  # JSON-serialisable method figures
    extra: Any = None  # method-private payload (NoteBank's archive, JRT's context ids)


@dataclass
class Answer:
    ids: list[int]  # generated token ids
    seconds: dict[str, float] = field(default_factory=dict)  # per-stage wall time
    stats: dict[str, Any] = field(default_factory=dict)  # JSON-serialisable method figures
    tokens: dict[str, int] = field(default_factory=dict)  # tokens read per kind: question, replay, ...


class Method(ABC):
    """A memory method. `read` sees only the context; `answer` one question at a time."""

    name: str

    @abstractmethod
    def read(self, backbone: Backbone, context_ids: list[int]) -> Memory:
        """Read the context once (ids include BOS when the tokenizer has one)."""

    @abstractmethod
    def answer(
        self,
        backbone: Backbone,
        memory: Memory,
        question_ids: list[int],
        question: Question,
        stop: list[int] | None = None,
    ) -> Answer:
        """Answer one question from a copy of `memory.state`; `memory` stays unchanged.
        Generates at most `question.max_new_tokens` tokens greedily; `stop` as in
        `Backbone.generate`."""
