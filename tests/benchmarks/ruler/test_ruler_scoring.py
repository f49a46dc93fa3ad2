"""RULER scoring: postprocess (strip, control characters to newlines), then string_match_all
(fraction of references found) or, for QA, string_match_part (any reference found)."""

from __future__ import annotations

import pytest

from memexp.core.types import Question


def question(references, metric="string_match_all") -> Question:
    return Question(id="q", prompt="", references=references, metric=metric, max_new_tokens=8)


@pytest.fixture
def ruler(make_ruler):
    return make_ruler()


@pytest.mark.parametrize(
    "generated,score",
    [
        (" 9919004, 8191410, 9348029 and 3082844.", 100.0),
        ("9919004\n8191410\x0b9348029", 75.0),  # three of four
        ("The numbers are 99190048191410", 50.0),  # substrings count, as in RULER
        ("none of them", 0.0),
        ("", 0.0),
    ],
)
def test_string_match_all_counts_each_reference(ruler, generated, score):
    q = question(["9919004", "8191410", "9348029", "3082844"])
    assert ruler.score(ruler.postprocess(generated, q), q) == score


def test_matching_ignores_case(ruler):
    q = question(["IAHZY", "XDCXN"])
    assert ruler.score("they are: iahzy, XdCxN", q) == 100.0


def test_postprocess_strips_and_turns_control_characters_into_newlines(ruler):
    q = question(["x"])
    assert ruler.postprocess("  first\x00second\tthird\x1f \n", q) == "first\nsecond\nthird"


def test_qa_scores_any_reference(ruler):
    q = question(["north", "into the Mediterranean"], metric="string_match_part")
    assert ruler.score("It flows North.", q) == 100.0
    assert ruler.score("It flows south.", q) == 0.0


def test_generated_examples_score_their_own_answers(make_ruler, tokenizer, squad_path):
    ruler = make_ruler(tasks=["niah_multiquery", "vt", "qa_1"], lengths=[2600], num_samples=2, squad_path=squad_path)
    for e in ruler.examples(tokenizer):
        q = e.questions[0]
        assert ruler.score(ruler.postprocess(" " + ", ".join(q.references) + "\n", q), q) == 100.0
        assert ruler.score(ruler.postprocess(q.references[0][:-1], q), q) == 0.0
