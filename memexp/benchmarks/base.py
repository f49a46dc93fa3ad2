"""What a benchmark yields and how it is scored.

A benchmark is data: examples made of one context and one or more questions. The runner
reads each context once and answers every question from a copy of the retained state.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Iterator

from memexp.backbones.base import InputFeed, Tokenizer
from memexp.core.types import Example, Question, Record


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
