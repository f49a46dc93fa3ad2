"""What every RULER generator returns, and the protocol the length search drives."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol


@dataclass
class Sample:
    """One generated input: `context + prompt` is RULER's input with its answer prefix."""

    context: str  # task text up to and including the haystack
    prompt: str  # the rest: question and answer prefix
    answers: list[str]
    meta: dict[str, Any] = field(default_factory=dict)


class Generator(Protocol):
    """Builds inputs whose haystack holds `size` units (words, sentences, documents).

    `build` is deterministic in (index, size, the state of rng); the length search calls
    it for many sizes with a fresh rng each time.
    """

    incremental: int  # RULER's `incremental`: where the first sample's size search starts
    min_size: int
    max_size: Optional[int]  # None: any size can be built

    def build(self, index: int, size: int, rng: random.Random) -> Sample: ...

    def exhausted(self, size: int) -> Exception:
        """The error when all `size` == max_size units still leave room (finite max_size only)."""


def sample_rng(task: str, seed: int, index: int) -> random.Random:
    """The random stream of one example.

    RULER draws every example of a run from one seeded stream after its length search, so
    an example depended on how many probes the search made. Here each example owns a
    stream: the same (task, seed, index) draws the same keys and values at every length
    and for every tokenizer, and every size its own length search tries keeps them.
    """
    return random.Random(f"{task}/{seed}/{index}")
