"""What a benchmark yields and how it is scored.

A benchmark is data: examples made of one context and one or more questions. The runner
reads each context once and answers every question from a copy of the retained state.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Iterator

from memexp.backbones.base import InputFeed, Tokenizer
from memexp.records import Record


@dataclass
class Question:
    """One question about an example's context.

    `prompt` is the text the model reads after the context (question and answer prefix);
    `prediction = postprocess(generated text)` is scored against `references` with `metric`.
    Decoding is greedy, up to `max_new_tokens`; it ends at the tokenizer's stop ids and at the
    last token of each string in `stop` (LongBench's pred.py adds "\n" that way), neither of
    which may end it before `min_new_tokens` tokens. `chat_template=False` keeps the question
    (and its example's context) out of the backbone's chat template even with `backbone.chat`
    (LongBench's pred.py does so for trec, triviaqa and samsum); the context is shared, so the
    example's first question decides. `answer_prefix` is the end of `prompt` that opens the
    answer (RULER's " The special magic numbers ... are"): without a chat template the model
    reads `prompt` as it is; with one, the prefix moves after the assistant header, where
    RULER's model templates put it (prepare.py: model_template(task) + answer_prefix). `meta` is benchmark-private: only the benchmark's own
    postprocess / score / aggregate read it; the runner and methods never do.
    """

    id: str
    prompt: str
    references: list[str]
    metric: str
    max_new_tokens: int
    meta: dict[str, Any] = field(default_factory=dict)
    stop: list[str] = field(default_factory=list)
    min_new_tokens: int = 0
    chat_template: bool = True
    answer_prefix: str = ""

    def __post_init__(self) -> None:
        if not self.prompt.endswith(self.answer_prefix):
            raise ValueError(f"question {self.id}: answer_prefix {self.answer_prefix!r} does not end its prompt")

    @property
    def user_prompt(self) -> str:
        """`prompt` without its answer prefix: the part inside a chat template's user turn."""
        return self.prompt[: len(self.prompt) - len(self.answer_prefix)]


@dataclass
class Example:
    """A context and its questions. `length` is the benchmark's length bucket (RULER's
    target length in tokens, LongBench's '0-4k'... bucket), the column of the summary table.
    `system` is the system prompt a chat template puts before the context (LongHealth's,
    MemoryAgentBench's agent message); None for none. `meta` is benchmark-private, as
    `Question.meta`. `bos=False` feeds the context without the tokenizer's begin-of-text token
    (a format trained without one: the Titan-Llama authors' QuALITY SFT)."""

    id: str
    task: str
    length: int | str
    context: str
    questions: list[Question]
    meta: dict[str, Any] = field(default_factory=dict)
    system: str | None = None
    # where the text came from when it is not the benchmark's own data (RULER's generated essay
    # stand-in): every record of the example copies it, so no score is mistaken for the real one
    source: str | None = None
    bos: bool = True


class Benchmark(ABC):
    """Yields examples for a tokenizer and scores predictions with the official metric."""

    name: str

    @abstractmethod
    def examples(self, tokenizer: Tokenizer) -> Iterator[Example]:
        """All examples of the configured tasks and lengths, in a fixed order."""

    def size_with(self, feed: InputFeed) -> None:  # noqa: B027 (an optional hook: most benchmarks need nothing)
        """How the runner will feed each example (chat template or not). A benchmark that fits its
        inputs to a token length (RULER) counts with it; the others need not look."""

    def num_examples(self) -> int | None:
        """How many examples `examples` yields, when known without generating them; lets the
        runner stream long contexts instead of holding them all."""
        return None

    def skipped(self) -> list[str]:
        """Ids of the examples the last `examples` call left out by the benchmark's own fit
        rule (LongBench v2's overlength=skip), in order; the runner lists them in
        summary.json instead of scoring them."""
        return []

    @abstractmethod
    def score(self, prediction: str, question: Question) -> float:
        """Score of one prediction in [0, 100] (the papers' scale)."""

    def postprocess(self, generated: str, question: Question) -> str:
        """Turn the generated text into the prediction that is scored."""
        return generated

    def aggregate(self, records: list[Record]) -> dict[str, float]:
        """Extra summary rows beyond the per task x length means (categories, overall
        macro averages); keys are metric names, values in [0, 100]."""
        return {}
