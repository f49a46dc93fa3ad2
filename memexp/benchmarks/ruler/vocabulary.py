"""Needle keys and values as RULER draws them (niah.py): "{adj}-{noun}" words from
wonderwords' lists, 7-digit numbers and version-4 uuids."""

from __future__ import annotations

import hashlib
import random
import uuid
from bisect import bisect_right
from collections.abc import Sequence
from functools import lru_cache


def _wonderwords(name: str) -> list[str]:
    from wonderwords import random_word

    return random_word._get_words_from_text_file(name)


@lru_cache(maxsize=None)
def nouns() -> tuple[str, ...]:
    return tuple(_wonderwords("nounlist.txt"))


@lru_cache(maxsize=None)
def adjectives() -> tuple[str, ...]:
    return tuple(_wonderwords("adjectivelist.txt"))


@lru_cache(maxsize=None)
def verbs() -> tuple[str, ...]:
    return tuple(_wonderwords("verblist.txt"))


@lru_cache(maxsize=None)
def wordlists_fingerprint() -> str:
    """Changes when the installed wonderwords lists change (part of the cache key)."""
    h = hashlib.sha256()
    for words in (adjectives(), nouns(), verbs()):
        h.update("\n".join(words).encode())
        h.update(b"\x00")
    return h.hexdigest()


class AdjectiveNounWords(Sequence):
    """`sorted(set(f"{adj}-{noun}" for adj in adjectives for noun in nouns))`, RULER's key
    vocabulary, indexable without building its ~6M strings.

    All words of one adjective share the prefix "{adj}-", so they sort like the nouns.
    Only adjectives whose word ranges overlap ("blue" and "blue-eyed") interleave; those
    few groups are materialised and sorted, every other adjective is a block of
    len(nouns) words. Same strings, same order, same length as the full list.
    """

    def __init__(self, adjective_list: Sequence[str], noun_list: Sequence[str]) -> None:
        self._nouns = sorted(set(noun_list))
        first, last = self._nouns[0], self._nouns[-1]
        ranges = sorted((f"{a}-{first}", f"{a}-{last}", a) for a in set(adjective_list))
        groups: list[list[str]] = []
        group_end = ""
        for start, end, adjective in ranges:
            if groups and start <= group_end:
                groups[-1].append(adjective)
                group_end = max(group_end, end)
            else:
                groups.append([adjective])
                group_end = end
        self._blocks: list[str | list[str]] = []
        self._starts: list[int] = []
        size = 0
        for group in groups:
            block = group[0] if len(group) == 1 else sorted({f"{a}-{n}" for a in group for n in self._nouns})
            self._starts.append(size)
            self._blocks.append(block)
            size += len(self._nouns) if isinstance(block, str) else len(block)
        self._size = size

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, index: int) -> str:
        if index < 0:
            index += self._size
        if not 0 <= index < self._size:
            raise IndexError(index)
        b = bisect_right(self._starts, index) - 1
        block, offset = self._blocks[b], index - self._starts[b]
        return f"{block}-{self._nouns[offset]}" if isinstance(block, str) else block[offset]


@lru_cache(maxsize=None)
def key_words() -> AdjectiveNounWords:
    return AdjectiveNounWords(adjectives(), nouns())


def random_number(rng: random.Random, num_digits: int = 7) -> str:
    return str(rng.randint(10 ** (num_digits - 1), 10**num_digits - 1))


def random_uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def random_value(rng: random.Random, kind: str) -> str:
    if kind == "numbers":
        return random_number(rng)
    if kind == "words":
        return rng.choice(key_words())
    if kind == "uuids":
        return random_uuid(rng)
    raise ValueError(f"unknown needle type {kind!r}: allowed values are numbers, words, uuids")
