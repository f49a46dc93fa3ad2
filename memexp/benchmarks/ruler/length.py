"""Length targeting: the largest haystack whose input fits the target length.

RULER's rule (scripts/data/synthetic/*.py): tokens of the input with its answer prefix
plus tokens_to_generate <= max_seq_length. memexp counts what its runner feeds: the
context encoded with BOS, the prompt encoded on its own, plus the question's
max_new_tokens.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

from memexp.backbones.base import Tokenizer
from memexp.benchmarks.ruler.sample import Sample


class TooShort(ValueError):
    """Not even the smallest haystack fits the target length."""

    def __init__(self, size: int, tokens: int) -> None:
        super().__init__(f"the smallest haystack ({size} units) already needs {tokens} tokens")
        self.size, self.tokens = size, tokens


class TokenBudget:
    def __init__(self, tokenizer: Tokenizer, length: int, max_new_tokens: int) -> None:
        self.tokenizer, self.length, self.max_new_tokens = tokenizer, length, max_new_tokens

    def total(self, sample: Sample) -> int:
        context = self.tokenizer.encode(sample.context, add_bos=True)
        prompt = self.tokenizer.encode(sample.prompt)
        return len(context) + len(prompt) + self.max_new_tokens


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
    128K). Here a first probe gives tokens per unit, secant steps land next to the
    boundary, and a short gallop plus bisection close the bracket: about five probes,
    each a full tokenization. Raises TooShort when even `low` overflows.
    """
    tokens: dict[int, int] = {}
    fits: Optional[int] = None  # largest size known to fit
    over: Optional[int] = None  # smallest size known to overflow

    def probe(size: int) -> int:
        nonlocal fits, over
        if size not in tokens:
            tokens[size] = total(size)
            if tokens[size] <= budget:
                fits = size if fits is None else max(fits, size)
            else:
                over = size if over is None else min(over, size)
        return tokens[size]

    def clamp(size: int) -> int:
        size = max(size, low, (fits or 0) + 1)
        if high is not None:
            size = min(size, high)
        if over is not None:
            size = min(size, over - 1)
        return size

    def done() -> bool:
        return (fits is not None and (over == fits + 1 or fits == high)) or over == low

    previous = clamp(start)
    probe(previous)
    current = clamp(math.floor(budget * previous / max(tokens[previous], 1)))
    for _ in range(secant_steps):
        if done() or current in tokens:
            break
        probe(current)
        slope = (tokens[current] - tokens[previous]) / (current - previous)
        if slope <= 0:
            break
        previous, current = current, clamp(current + math.floor((budget - tokens[current]) / slope))

    step = 1
    while not done() and over is None:
        probe(clamp(fits + step))
        step *= 2
    step = 1
    while not done() and fits is None:
        probe(max(low, over - step))
        step *= 2
    if fits is None:
        raise TooShort(low, tokens[low])
    while not done():
        probe((fits + over) // 2)
    return fits
