"""Training text in RULER's NIAH style (niah_single_1: noise haystack, word keys, number values).

Every piece comes from memexp's RULER generator: the noise sentence, the needle sentence
"One of the special magic numbers for {key} is: {value}.", the task text around the haystack
and RULER's question with its answer prefix. Three forms of the question:

- `ruler`: exactly what the benchmark feeds (task text, haystack, question, answer prefix);
- `short`: haystack, then "The special magic number for {key} is" (curriculum start: the
  model first learns to fetch a number a few bytes back);
- and, with `note=True`, the text NoteBank replays after a state reset: the needle sentence
  alone, the replay suffix, then the question, so the model learns to read a replayed note.

The target is " {value}." then EOS, so generation stops by itself after the number.
Each example draws from its own `random.Random(stream)`; the stream names carry a prefix
RULER's evaluation streams ("{task}/{seed}/{index}") never have, so training never sees an
evaluation example.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

from memexp.backbones.base import Tokenizer
from memexp.benchmarks.ruler.niah import NiahGenerator
from memexp.benchmarks.ruler.sample import Sample
from memexp.benchmarks.ruler.tasks import TASKS
from memexp.benchmarks.ruler.templates import NEEDLE

TASK = "niah_single_1"
STREAM_PREFIX = "tiny_gdn-train"
SHORT_QUESTION = "\nThe special magic number for {key} is"
QUESTIONS = ("ruler", "short")


@dataclass(frozen=True)
class NiahText:
    """One training sequence: `ids[answer_start:]` are the answer tokens (value, '.', EOS)."""

    ids: list[int]
    answer_start: int
    value: str
    needle_start: int  # the needle sentence is ids[needle_start:needle_end]
    needle_end: int


@lru_cache(maxsize=None)
def _generator() -> NiahGenerator:
    # `length` only sets RULER's search increment and `seed` only shuffles several needles:
    # neither matters for one needle placed by hand-picked sizes.
    return NiahGenerator(TASKS[TASK], length=1024, seed=0)


def stream(seed: int, *names) -> random.Random:
    """The random stream of one training example."""
    return random.Random("/".join([STREAM_PREFIX, str(seed), *map(str, names)]))


def ruler_sample(rng: random.Random, lines: int) -> Sample:
    """A niah_single_1 sample with `lines` noise lines (>= 1) around the needle."""
    return _generator().build(0, lines, rng)


def niah_text(tokenizer: Tokenizer, rng: random.Random, lines: int, question: str, note: bool,
              replay_suffix: str = " ") -> NiahText:
    """One sequence. `lines` noise lines in the haystack (ignored for `note`)."""
    if question not in QUESTIONS:
        raise ValueError(f"question={question!r}: allowed values are {', '.join(QUESTIONS)}")
    sample = ruler_sample(rng, max(lines, 1))
    needle = sample.meta["needles"][0]
    key, value = needle["key"], needle["value"]
    prompt = sample.prompt if question == "ruler" else SHORT_QUESTION.format(key=key)
    sentence = NEEDLE.format(type_needle_v="numbers", key=key, value=value)
    if note:
        ids = tokenizer.encode(sentence + replay_suffix + prompt)
        needle_start, needle_end = 0, len(tokenizer.encode(sentence))
    else:
        context = sample.context if question == "ruler" else sample.context.split("\n", 1)[1]  # short: no task text
        ids = tokenizer.encode(context, add_bos=True) + tokenizer.encode(prompt)
        before = context[: context.index(sentence)]
        needle_start = len(tokenizer.encode(before, add_bos=True))
        needle_end = len(tokenizer.encode(before + sentence, add_bos=True))
    answer = tokenizer.encode(f" {value}.") + [tokenizer.eos_id]
    return NiahText(ids=ids + answer, answer_start=len(ids), value=value,
                    needle_start=needle_start, needle_end=needle_end)
