"""Length targeting: the largest haystack whose input fits the target length.

RULER's rule (scripts/data/synthetic/*.py): tokens of the input with its answer prefix
plus tokens_to_generate <= max_seq_length, the model's chat template included when
prepare.py is given one. memexp counts what its runner feeds (memexp.backbones.base.InputFeed):
the context encoded with BOS (or inside the chat template's head), the prompt encoded on its
own (with the template's tail before the answer prefix), plus the question's max_new_tokens.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

from memexp.backbones.base import InputFeed, Tokenizer
from memexp.benchmarks.ruler.sample import Sample


class TooShort(ValueError):
    """Not even the smallest haystack fits the target length."""

    def __init__(self, size: int, tokens: int) -> None:
        super().__init__(f"the smallest haystack ({size} units) already needs {tokens} tokens")
        self.size, self.tokens = size, tokens


def split_answer_prefix(prompt: str, answer_prefix: str) -> tuple[str, str]:
    """(user prompt, formatted answer prefix) of a generated prompt, given the task template's
    unformatted answer prefix: its first 10 characters locate the formatted one at the end, as
    RULER's generators split it off (niah.py: input_text.rfind(answer_prefix[:10]))."""
    at = prompt.rfind(answer_prefix[:10]) if answer_prefix else -1
    return (prompt[:at], prompt[at:]) if at >= 0 else (prompt, "")


class TokenBudget:
    """`feed` (memexp.backbones.base.InputFeed): how the runner will feed the input; None counts
    the plain form (context with BOS, prompt as it is)."""

    def __init__(self, tokenizer: Tokenizer, length: int, max_new_tokens: int, feed: InputFeed | None = None,
                 answer_prefix: str = "") -> None:
        self.tokenizer, self.length, self.max_new_tokens = tokenizer, length, max_new_tokens
        self.feed, self.answer_prefix = feed, answer_prefix

    def total(self, sample: Sample) -> int:
        if self.feed is None:
            context = self.tokenizer.encode(sample.context, add_bos=True)
            prompt = self.tokenizer.encode(sample.prompt)
        else:
            context = self.feed.context_ids(sample.context)
            prompt = self.feed.question_ids(sample.context, *split_answer_prefix(sample.prompt, self.answer_prefix))
        return len(context) + len(prompt) + self.max_new_tokens


class _Bracket:
    """What the search knows: every probed size's total, the largest size known to fit and
    the smallest known to overflow, within [low, high]."""

    def __init__(self, total: Callable[[int], int], budget: int, low: int, high: Optional[int]) -> None:
        self.total, self.budget, self.low, self.high = total, budget, low, high
        self.tokens: dict[int, int] = {}
        self.fits: Optional[int] = None
        self.over: Optional[int] = None

    def probe(self, size: int) -> int:
        if size not in self.tokens:
            self.tokens[size] = self.total(size)
            if self.tokens[size] <= self.budget:
                self.fits = size if self.fits is None else max(self.fits, size)
            else:
                self.over = size if self.over is None else min(self.over, size)
        return self.tokens[size]

    def clamp(self, size: int) -> int:
        """`size` moved inside the open bracket (fits, over) and [low, high]."""
        size = max(size, self.low, (self.fits or 0) + 1)
        if self.high is not None:
            size = min(size, self.high)
        if self.over is not None:
            size = min(size, self.over - 1)
        return size

    def done(self) -> bool:
        closed = self.fits is not None and (self.over == self.fits + 1 or self.fits == self.high)
        return closed or self.over == self.low


def _secant(bracket: _Bracket, start: int, steps: int) -> None:
    """A first probe gives tokens per unit; secant steps then land next to the boundary."""
    previous = bracket.clamp(start)
    bracket.probe(previous)
    current = bracket.clamp(math.floor(bracket.budget * previous / max(bracket.tokens[previous], 1)))
    for _ in range(steps):
        if bracket.done() or current in bracket.tokens:
            return
        bracket.probe(current)
        slope = (bracket.tokens[current] - bracket.tokens[previous]) / (current - previous)
        if slope <= 0:
            return
        gap = math.floor((bracket.budget - bracket.tokens[current]) / slope)
        previous, current = current, bracket.clamp(current + gap)


def _gallop(bracket: _Bracket) -> None:
    """Doubling steps until both a fitting and an overflowing size are known."""
    step = 1
    while not bracket.done() and bracket.over is None:
        bracket.probe(bracket.clamp(bracket.fits + step))
        step *= 2
    step = 1
    while not bracket.done() and bracket.fits is None:
        bracket.probe(max(bracket.low, bracket.over - step))
        step *= 2


def largest_fitting(
    total: Callable[[int], int],
    budget: int,
    start: int,
    low: int = 1,
    high: Optional[int] = None,
    secant_steps: int = 6,
) -> int:
    """The largest size in [low, high] with total(size) <= budget, for totals that grow
    about linearly with the size.

    RULER bisects between `incremental` and three times a first estimate (~17 probes at
    128K). Here secant steps from `start` land next to the boundary, and a short gallop
    plus bisection close the bracket: about five probes, each a full tokenization, and
    two when `start` is already the answer (the previous sample's size). Raises TooShort
    when even `low` overflows.
    """
    bracket = _Bracket(total, budget, low, high)
    _secant(bracket, start, secant_steps)
    _gallop(bracket)
    if bracket.fits is None:
        raise TooShort(low, bracket.tokens[low])
    while not bracket.done():
        bracket.probe((bracket.fits + bracket.over) // 2)
    return bracket.fits
