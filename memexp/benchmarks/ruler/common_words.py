"""Common words extraction (cwe), as NVIDIA/RULER scripts/data/synthetic/
common_words_extraction.py generates it: a numbered list where 10 words repeat 30 times
and the others 3 times, after one worked example."""

from __future__ import annotations

import random
from typing import Optional, Sequence

from memexp.benchmarks.ruler.sample import Sample
from memexp.benchmarks.ruler.sources import MissingData
from memexp.benchmarks.ruler.tasks import CommonWordsTask
from memexp.benchmarks.ruler.templates import COMMON_WORDS, split_prompt
from memexp.benchmarks.ruler.vocabulary import adjectives, nouns, verbs


def _numbered(words: Sequence[str]) -> str:
    return " ".join(f"{i + 1}. {w}" for i, w in enumerate(words))


class CommonWordsGenerator:
    def __init__(self, spec: CommonWordsTask, length: int, seed: int, extra_words: Optional[list[str]] = None) -> None:
        self.spec, self.length, self.seed = spec, length, seed
        self.words = sorted(set(nouns() + adjectives() + verbs()))
        random.Random(seed).shuffle(self.words)
        # RULER samples from its larger English list once a list needs more distinct words
        self.extra_words = extra_words
        self.incremental = 10
        self.min_size = spec.num_cw
        self.max_size = max(len(self.words), len(extra_words or []))
        short = length < 4096
        self.example_shape = (20, 3, 1) if short else (40, 10, 3)  # words, common and other repeats
        self.repeats = (6, 1) if short else (spec.freq_cw, spec.freq_ucw)

    def _word_list(self, rng: random.Random, num_words: int, common_repeats: int, other_repeats: int):
        pool = self.words if num_words <= len(self.words) else self.extra_words
        chosen = rng.sample(pool, num_words)
        common, others = chosen[: self.spec.num_cw], chosen[self.spec.num_cw :]
        listed = common * common_repeats + others * other_repeats
        random.Random(self.seed).shuffle(listed)
        return _numbered(listed), common

    def exhausted(self, size: int) -> MissingData:
        return MissingData(
            f"RULER task cwe at {self.length} tokens needs more than {size} distinct words: pass "
            "bench.cwe_words_path=<file> with a larger word list (RULER's english_words.json, a JSON "
            "list, or a .txt with one word per line)"
        )

    def build(self, index: int, size: int, rng: random.Random) -> Sample:
        examples = []
        for _ in range(self.spec.num_fewshot):
            listed, common = self._word_list(rng, *self.example_shape)
            head, tail = split_prompt(COMMON_WORDS.full)
            examples.append(head + listed + tail + " " + _numbered(common))
        listed, common = self._word_list(rng, size, *self.repeats)
        head, prompt = split_prompt(COMMON_WORDS.full)
        context = "\n".join(examples) + "\n" + head + listed
        return Sample(context=context, prompt=prompt, answers=common, meta={"size": size, "common": common})
