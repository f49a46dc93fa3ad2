"""LongBench, LongBench v2, MemoryAgentBench and LongHealth metrics against hand-computed
values covering their normalisation edge cases."""

import pytest

from memexp.benchmarks.metrics import (
    classification,
    longbench_v2_choice,
    longhealth_choice,
    mab_parse_output,
    normalize_answer,
    qa_f1,
    rouge_l,
    substring_exact_match,
)


@pytest.mark.parametrize("text, expected", [
    ("The Eiffel Tower.", "eiffel tower"),
    ("an apple, a pear & the plum!", "apple pear plum"),
    ("Theater\tthen  AN", "theater then"),  # articles only as whole words
    ("  \n ", ""),
    ("café—Ünïcode", "café—ünïcode"),  # only ASCII punctuation is dropped
])
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


@pytest.mark.parametrize("prediction, references, expected", [
    ("The Eiffel Tower.", ["eiffel tower"], 100.0),
    ("Hello, World!", ["hello world"], 100.0),
    ("an apple", ["apple"], 100.0),
    # pred {cat, sat}, ref {cat, sat, on, mat}: P = 1, R = 1/2, F = 2/3
    ("cat sat", ["the cat sat on the mat"], 200 / 3),
    # repeated tokens count once per match: "cat cat" vs "cat": P = 1/2, R = 1
    ("the the cat cat", ["cat"], 200 / 3),
    ("", ["anything"], 0.0),
    ("The.", ["the"], 0.0),  # both normalise to nothing: no overlap is 0
    # max over references: [paris, france] gives P = 1, R = 1/2
    ("Paris", ["London", "Paris, France"], 200 / 3),
    ("no overlap", ["something else"], 0.0),
])
def test_qa_f1(prediction, references, expected):
    assert qa_f1(prediction, references) == pytest.approx(expected)


def _f(p, r):
    """The `rouge` package's F: 2PR / (P + R + 1e-8)."""
    return 100 * 2 * p * r / (p + r + 1e-8)


@pytest.mark.parametrize("prediction, references, expected", [
    # word sets of 5 each; union LCS {the, cat, on, mat} = 4: P = R = 4/5
    ("the cat sat on the mat", ["the cat is on the mat"], _f(0.8, 0.8)),
    ("the cat", ["the cat"], _f(1.0, 1.0)),
    ("The Cat", ["the cat"], 0.0),  # case-sensitive, no normalisation
    ("", ["the cat"], 0.0),  # the package raises on an empty hypothesis: 0
    (".", ["the cat"], 0.0),  # only '.' splits sentences: nothing left
    # summary level: hyp sentences "a b" and "c d", ref "c a": LCS with each gives {a} and
    # {c}, union 2 of m = 2 ref words and n = 4 hyp words: R = 1, P = 1/2 (a plain LCS
    # over the whole text would find only 1)
    ("a b. c d", ["c a"], _f(0.5, 1.0)),
    ("x y", ["q", "x z"], _f(0.5, 0.5)),  # max over references
])
def test_rouge_l(prediction, references, expected):
    assert rouge_l(prediction, references) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("prediction, reference, classes, expected", [
    ("NUM", "NUM", ["LOC", "NUM", "HUM"], 100.0),
    ("NUM or HUM", "NUM", ["LOC", "NUM", "HUM"], 50.0),
    ("LOC", "NUM", ["LOC", "NUM", "HUM"], 0.0),
    ("", "NUM", ["LOC", "NUM", "HUM"], 0.0),
    # a matched class inside the reference (but not equal) is dropped
    ("Other location", "Other location", ["Other", "Other location"], 100.0),
    # the official loop skips the class after a removed one: "ab" is removed, "b" is never
    # examined and stays, so 2 matches remain
    ("abc", "abc", ["ab", "b", "abc"], 50.0),
    ("abc", "abc", ["ab", "abc", "b"], 100.0),
    ("Num", "NUM", ["NUM"], 0.0),  # case-sensitive
])
def test_classification(prediction, reference, classes, expected):
    assert classification(prediction, [reference], classes) == pytest.approx(expected)


def test_classification_takes_max_over_references():
    assert classification("HUM", ["NUM", "HUM"], ["NUM", "HUM"]) == 100.0


@pytest.mark.parametrize("prediction, references, expected", [
    ("The answer is Paris.", ["paris"], 100.0),
    ("Parisian", ["Paris"], 100.0),  # substring, not token match
    ("a dog", ["The dog"], 100.0),
    ("dogs", ["the dog!"], 100.0),
    ("cat", ["dog"], 0.0),
    ("", ["dog"], 0.0),
    ("anything", ["."], 100.0),  # a reference that normalises to "" is in every prediction
    ("Berlin", ["Paris", "berlin"], 100.0),
    ("New-York", ["new york"], 0.0),  # punctuation is removed, not spaced: "newyork"
])
def test_substring_exact_match(prediction, references, expected):
    assert substring_exact_match(prediction, references) == expected


@pytest.mark.parametrize("output, expected", [
    ("Some text\nAnswer: Paris\nmore", "Paris"),
    ("ANSWER:  Rome ", "Rome"),
    ("answer: answer: x", "x"),  # one repeated prefix removed
    ("Paris\nLondon", "Paris"),  # no prefix: the first line
    ("", ""),
])
def test_mab_parse_output(output, expected):
    assert mab_parse_output(output) == expected


@pytest.mark.parametrize("response, expected", [
    ("The correct answer is (C)", "C"),
    ("**The correct answer is B**", "B"),
    ("  The correct answer is (A).\n", "A"),
    ("The correct answer is (E)", None),
    ("the correct answer is A", None),  # case-sensitive
    ("The correct answer is Apple", "A"),  # the official pattern has no word boundary
    ("", None),
])
def test_longbench_v2_choice(response, expected):
    assert longbench_v2_choice(response) == expected


@pytest.mark.parametrize("response, expected", [
    ("The correct answer is C: Acute bronchitis.", "C"),
    ("The correct answer is C", ""),  # the colon is required
    ("The correct answer is B: x. The correct answer is D: y.", "B"),
    ("The correct answer is F: Question cannot be answered", "F"),
    ("", ""),
])
def test_longhealth_choice(response, expected):
    assert longhealth_choice(response) == expected
