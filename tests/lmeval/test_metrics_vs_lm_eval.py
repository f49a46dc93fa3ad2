"""memexp's benchmark metrics (memexp/benchmarks/metrics.py, the reference ports of the official
scorers) pinned to lm-eval's where both define one: the same strings through both.

lm-eval's per-sample functions take (doc, [prediction]) and score in [0, 1]; memexp's take
(prediction, references) and score in [0, 100]. Where lm-eval departs from the official scorer
(RULER's string_match_part), the test pins the difference documented in docs/lm_eval.md.
"""

import pytest

pytest.importorskip("lm_eval")

from lm_eval.tasks.longbench import metrics as lb  # noqa: E402
from lm_eval.tasks.ruler import common_utils as ruler  # noqa: E402

from memexp.benchmarks import metrics as mx  # noqa: E402

QA = [
    ("The Eiffel Tower, in Paris!", ["eiffel tower"]),
    ("  an apple a day  ", ["The apple", "a day"]),
    ("cat cat cat dog", ["cat dog dog"]),
    ("", ["anything"]),
    ("yes", ["no"]),
    ("Ünïcode — “quotes” (and) punctuation;", ["unicode quotes and punctuation"]),
    ("1,000,000 people", ["1000000 people", "a million people"]),
]

SUMMARIES = [
    ("The meeting approved the budget. Bob will send the minutes.", ["The budget was approved. Bob sends minutes."]),
    ("the cat sat on the mat", ["The cat sat on the mat."]),  # case-sensitive
    ("", ["A reference summary."]),  # the rouge package raises on an empty hypothesis: 0
    ("One. Two. Three.", ["Three. Two. One.", "Four."]),
]

TREC = ["Abbreviation", "Entity", "Description", "Human being", "Location", "Numeric value", "Human",
        "Human being name"]
CLASSIFICATION = [
    ("Type: Location", ["Location"]),
    ("Numeric value or Entity", ["Numeric value"]),
    ("Human being", ["Human being"]),  # "Human" is also in it, and a substring of the answer: removed
    # "Human being" is removed, which skips "Human" (the official loop mutates the list it walks):
    # it stays a match and halves the score
    ("Human being name", ["Human being name"]),
    ("nothing matches", ["Entity"]),
]


@pytest.mark.parametrize("pred, refs", QA)
def test_qa_f1(pred, refs):
    assert mx.qa_f1(pred, refs) == pytest.approx(100 * lb.get_qa_f1_score({"answers": refs}, [pred])["qa_f1_score"])


@pytest.mark.parametrize("text", [p for p, _ in QA] + [r for _, rs in QA for r in rs])
def test_normalize_answer(text):
    assert mx.normalize_answer(text) == lb.normalize_answer(text)


@pytest.mark.parametrize("pred, refs", SUMMARIES)
def test_rouge_l(pred, refs):
    assert mx.rouge_l(pred, refs) == pytest.approx(100 * lb.get_rouge_score({"answers": refs}, [pred])["rouge_score"])


@pytest.mark.parametrize("pred, refs", CLASSIFICATION)
def test_classification(pred, refs):
    lm = lb.get_classification_score({"answers": refs, "all_classes": TREC}, [pred])["classification_score"]
    assert mx.classification(pred, refs, TREC) == pytest.approx(100 * lm)


def test_classification_keeps_the_official_skipped_match():
    # by hand, in TREC's class order: matches Human being, Human, Human being name; "Human being"
    # is removed, "Human" (next) is skipped and stays, "Human being name" is the answer -> 1/2
    assert mx.classification("Human being name", ["Human being name"], TREC) == 50.0


@pytest.mark.parametrize("pred, refs", [("The numbers are 123 and 456.", ["123", "456"]), ("123", ["123", "456"]),
                                        ("nothing", ["7"]), ("UUID ABC-def", ["abc-DEF"])])
def test_ruler_string_match_all(pred, refs):
    post = mx.ruler_postprocess(pred)
    assert post == ruler.postprocess_pred([pred])[0]
    assert mx.string_match_all(post, refs) == pytest.approx(100 * ruler.string_match_all([post], [refs]))


def test_ruler_string_match_part_differs_from_the_official_any_match():
    # RULER's QA metric (scripts/eval/synthetic/constants.py): 1 if ANY reference is in the prediction.
    # lm-eval's string_match_part: the fraction of references found, so answers with several
    # accepted spellings (SQuAD) score below RULER's.
    refs = ["Paris", "the city of Paris", "Paris, France"]
    assert mx.string_match_part("Paris", refs) == 100.0
    assert ruler.string_match_part(["Paris"], [refs]) == pytest.approx(1 / 3)
    # with one reference they agree
    assert mx.string_match_part("in Paris", ["paris"]) == 100 * ruler.string_match_part(["in Paris"], [["paris"]])
