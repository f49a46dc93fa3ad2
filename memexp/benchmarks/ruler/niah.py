"""Needle in a haystack, as NVIDIA/RULER scripts/data/synthetic/niah.py generates it."""

from __future__ import annotations

import random
from typing import Optional

import numpy as np

from memexp.benchmarks.ruler.haystacks import EssayHaystack
from memexp.benchmarks.ruler.sample import Sample
from memexp.benchmarks.ruler.tasks import NiahTask
from memexp.benchmarks.ruler.templates import NEEDLE, NIAH, NOISE, singular, split_prompt
from memexp.benchmarks.ruler.vocabulary import random_value

# needle depths in percent of the essay's sentences: 0, 3, 5, ..., 97, 100
DEPTHS = [int(d) for d in np.round(np.linspace(0, 100, num=40, endpoint=True)).astype(int)]


def _join(parts: list[str], needle_at: dict[int, int], separator: str) -> tuple[str, dict[int, int]]:
    """`separator.join(parts)` and the character offset of each needle part."""
    offsets, position = {}, 0
    for i, part in enumerate(parts):
        if i in needle_at:
            offsets[needle_at[i]] = position
        position += len(part) + len(separator)
    return separator.join(parts), offsets


class NiahGenerator:
    def __init__(self, spec: NiahTask, length: int, seed: int, essays: Optional[EssayHaystack] = None) -> None:
        if spec.haystack == "essay" and essays is None:
            raise ValueError("the essay haystack needs the essay text")
        self.spec, self.seed, self.essays = spec, seed, essays
        self.num_k = max(spec.num_k, spec.num_q)
        self.num_needles = self.num_k * spec.num_v
        if spec.haystack == "essay":
            self.incremental = 500
        else:
            self.incremental = 5 if length < 4096 else 25
        # noise and needle haystacks sample one sentence slot per needle
        self.min_size = 1 if spec.haystack == "essay" else self.num_needles
        self.max_size = None
        self.template, self.type_v = NIAH.full, spec.type_v
        if spec.num_q * spec.num_v == 1:
            self.template, self.type_v = singular(self.template), spec.type_v[:-1]

    def _needle(self, key: str, value: str) -> str:
        return NEEDLE.format(type_needle_v=self.spec.type_v, key=key, value=value)

    def build(self, index: int, size: int, rng: random.Random) -> Sample:
        spec = self.spec
        keys, values, needles = [], [], []
        for _ in range(self.num_k):
            keys.append(random_value(rng, spec.type_k))
            values.append([])
            for _ in range(spec.num_v):
                values[-1].append(random_value(rng, spec.type_v))
                needles.append({"key": keys[-1], "value": values[-1][-1]})
        random.Random(self.seed).shuffle(needles)

        if spec.haystack == "essay":
            haystack, offsets = self._essay(size, needles, rng)
        else:
            haystack, offsets = self._lines(size, needles, rng)

        indices = rng.sample(range(self.num_k), spec.num_q)
        queries = [keys[i] for i in indices]
        answers = [v for i in indices for v in values[i]]
        query = ", ".join(queries[:-1]) + ", and " + queries[-1] if len(queries) > 1 else queries[0]

        head, prompt = split_prompt(self.template, type_needle_v=self.type_v, query=query)
        for j, needle in enumerate(needles):
            needle["offset"] = len(head) + offsets[j]
        meta = {
            "size": size,
            "haystack": spec.haystack,
            "keys": keys,
            "values": values,
            "queries": queries,
            "needles": needles,
        }
        return Sample(context=head + haystack, prompt=prompt, answers=answers, meta=meta)

    def _essay(self, size: int, needles: list[dict], rng: random.Random) -> tuple[str, dict[int, int]]:
        sentences = self.essays.sentences(size)
        depths = sorted(rng.sample(DEPTHS, len(needles)))
        cuts = [0] + [int(len(sentences) * (d / 100)) for d in depths] + [len(sentences)]
        parts, needle_at = [], {}
        for i in range(1, len(cuts)):
            parts.append(" ".join(sentences[cuts[i - 1] : cuts[i]]))
            if i - 1 < len(needles):
                needle_at[len(parts)] = i - 1
                needles[i - 1]["depth"] = depths[i - 1]
                parts.append(self._needle(needles[i - 1]["key"], needles[i - 1]["value"]))
        return _join(parts, needle_at, " ")

    def _lines(self, size: int, needles: list[dict], rng: random.Random) -> tuple[str, dict[int, int]]:
        spec = self.spec
        if spec.haystack == "noise":
            lines = [NOISE] * size
        else:
            lines = [self._needle(random_value(rng, spec.type_k), random_value(rng, spec.type_v)) for _ in range(size)]
        tags: list[Optional[int]] = [None] * size
        slots = sorted(rng.sample(range(size), len(needles)), reverse=True)
        for j, (slot, needle) in enumerate(zip(slots, needles)):
            lines.insert(slot, self._needle(needle["key"], needle["value"]))
            tags.insert(slot, j)
        needle_at = {i: j for i, j in enumerate(tags) if j is not None}
        return _join(lines, needle_at, "\n")
