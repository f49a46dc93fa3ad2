"""Needle keys and values: RULER's sorted "{adj}-{noun}" list without building it, 7-digit
numbers, version-4 uuids; Punkt sentence splits; the zeta function of fwe."""

from __future__ import annotations

import math
import random
import re

import pytest

from memexp.benchmarks.ruler.freq_words import zeta
from memexp.benchmarks.ruler.sentences import split_sentences
from memexp.benchmarks.ruler.vocabulary import AdjectiveNounWords, adjectives, key_words, nouns, random_value


def brute_force(adjs, nouns_):
    return sorted(set(f"{a}-{n}" for a in adjs for n in nouns_))


def test_adjective_noun_words_equal_the_sorted_set_on_tricky_lists():
    # prefixes that interleave ("blue-" < "blue-eyed-" < "bluer-"), uppercase nouns,
    # duplicates, and hyphens that make two pairs spell the same word ("x-y"+"z" == "x"+"y-z")
    adjs = ["blue", "blue-eyed", "bluer", "blue", "x", "x-y", "Early", "a"]
    nouns_ = ["ATM", "apple", "y-z", "z", "eyed-cat", "zebra", "apple"]
    words = AdjectiveNounWords(adjs, nouns_)
    expected = brute_force(adjs, nouns_)
    assert len(words) == len(expected)
    assert [words[i] for i in range(len(words))] == expected
    assert words[-1] == expected[-1]
    with pytest.raises(IndexError):
        words[len(expected)]


def test_key_words_from_wonderwords():
    words = key_words()
    # values of RULER's own sorted(set(...)) over wonderwords 3.0.1's lists
    assert len(words) == 6_171_620
    assert (words[0], words[123_456], words[-1]) == ("Early-ATM", "absorbed-controversy", "zonked-zucchini")


@pytest.mark.slow
def test_key_words_equal_rulers_full_list():
    words, expected = key_words(), brute_force(adjectives(), nouns())
    assert len(words) == len(expected)
    assert all(words[i] == w for i, w in enumerate(expected))


def test_random_values():
    rng = random.Random(3)
    numbers = [random_value(rng, "numbers") for _ in range(200)]
    assert all(re.fullmatch(r"[1-9]\d{6}", n) for n in numbers)
    uuids = [random_value(rng, "uuids") for _ in range(50)]
    assert all(re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", u) for u in uuids)
    assert random_value(random.Random(0), "words") == key_words()[random.Random(0).randrange(len(key_words()))]
    with pytest.raises(ValueError, match="unknown needle type 'letters'"):
        random_value(rng, "letters")


def test_sentences_split_as_nltk_punkt():
    # expected output of nltk's PunktSentenceTokenizer with the English punkt_tab parameters
    text = (
        "Mr. Jones met Dr. Smith at 5 p.m. on Jan. 3 in Washington, D.C. and they talked. "
        "The U.S. economy grew 2.5 percent last year. Was it enough? \"Not really,\" he said. "
        "Startups (e.g. Viaweb) need users... Lots of them! J. R. R. Tolkien wrote books. "
        "It cost $3.50 per share. The end"
    )
    assert split_sentences(text) == [
        "Mr. Jones met Dr. Smith at 5 p.m. on Jan. 3 in Washington, D.C. and they talked.",
        "The U.S. economy grew 2.5 percent last year.",
        "Was it enough?",
        "\"Not really,\" he said.",
        "Startups (e.g.",
        "Viaweb) need users... Lots of them!",
        "J. R. R. Tolkien wrote books.",
        "It cost $3.50 per share.",
        "The end",
    ]


def test_zeta_is_correctly_rounded():
    assert zeta(2.0) == math.pi**2 / 6 == 1.6449340668482264  # scipy.special.zeta(2.0), RULER's alpha
    assert zeta(3.0) == 1.2020569031595942
    assert zeta(4.0) == 1.0823232337111381
    assert zeta(1.5) == 2.612375348685488
    with pytest.raises(ValueError):
        zeta(1.0)
