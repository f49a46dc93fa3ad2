"""QuALITY: one example per article, the reconstructed prompt and parser, HARD subset."""

import json
import logging

import pytest

from memexp.backbones.tokenizer import ByteTokenizer
from memexp.benchmarks.quality.benchmark import Quality, file_name, quality_choice
from memexp.benchmarks.quality.config import QualityConfig
from memexp.core.types import Question, Record

TOK = ByteTokenizer()


def question(text, gold, difficult=0):
    return {"question": text, "options": ["red", "green", "blue", "white "], "gold_label": gold,
            "writer_label": gold, "validation": [], "speed_validation": [], "difficult": difficult}


def question_set(article_id, writer, questions, article="Once upon a time.\n\nThe end. "):
    return {"article_id": article_id, "set_unique_id": f"{article_id}_{writer}", "batch_num": "1",
            "writer_id": writer, "source": "Gutenberg", "title": f"Title {article_id}", "author": "A",
            "topic": "", "url": "", "year": "1950", "license": "", "article": article, "questions": questions}


def write(folder, sets, split="dev"):
    path = folder / file_name(split)
    path.write_text("".join(json.dumps(s) + "\n" for s in sets))
    return path


def test_question_sets_of_one_article_share_one_example(tmp_path):
    write(tmp_path, [question_set("A1", "w1", [question("Q1?", 2), question("Q2?", 4, 1)]),
                     question_set("A2", "w1", [question("Q3?", 1)]),
                     question_set("A1", "w2", [question("Q4?", 3)])])
    examples = list(Quality(QualityConfig(data_path=str(tmp_path))).examples(TOK))
    assert [e.id for e in examples] == ["A1", "A2"]
    a1 = examples[0]
    assert [q.id for q in a1.questions] == ["A1_w1/0", "A1_w1/1", "A1_w2/0"]
    assert [q.references for q in a1.questions] == [["B"], ["D"], ["C"]]
    assert [q.meta["hard"] for q in a1.questions] == [False, True, False]
    assert (a1.task, a1.length, a1.questions[0].max_new_tokens) == ("quality", "dev", 10)


def test_question_and_options_read_back_with_the_scrolls_parser(tmp_path):
    r"""lm-eval's SCROLLS QuALITY parser (question up to the first blank line, choices split on
    r" *\([A-D]\) *") recovers the question and the four options from the prompt."""
    import re

    write(tmp_path, [question_set("A1", "w1", [question("Which colour?", 1)])])
    prompt = next(Quality(QualityConfig(data_path=str(tmp_path))).examples(TOK)).questions[0].prompt
    block = prompt.removeprefix("Question and Possible Answers:\n").removesuffix("\n\nAnswer:")
    split = block.find("\n\n")
    assert block[:split] == "Which colour?"
    assert [" ".join(c.split()) for c in re.split(r" *\([A-D]\) *", block[split + 2:])[1:]] == [
        "red", "green", "blue", "white"]


def test_prompt_is_the_zeroscrolls_layout(tmp_path):
    write(tmp_path, [question_set("A1", "w1", [question(" Which colour? ", 1)])])
    ex = next(Quality(QualityConfig(data_path=str(tmp_path / file_name("dev")))).examples(TOK))
    assert ex.context + ex.questions[0].prompt == (
        "You are provided a story and a multiple-choice question with 4 possible answers (marked by A, B, C, D). "
        "Choose the best answer by writing its corresponding letter (either A, B, C, or D).\n\nStory:\n"
        "Once upon a time.\n\nThe end.\n\nQuestion and Possible Answers:\nWhich colour?\n\n (A) red\n (B) green\n"
        " (C) blue\n (D) white\n\nAnswer:")
    assert ex.context.endswith("The end.\n\n")


@pytest.mark.parametrize("prediction, letter", [
    ("B", "B"), (" (C) blue", "C"), ("D.", "D"), ("A: red", "A"), ("The answer is (B).", "B"),
    ("answer is: C", "C"), ("Blue", None), ("", None), ("E", None),
])
def test_choice_parser(prediction, letter):
    assert quality_choice(prediction) == letter


def test_score_and_hard_subset(tmp_path):
    write(tmp_path, [question_set("A1", "w1", [question("Q1?", 2), question("Q2?", 4, 1), question("Q3?", 1, 1)])])
    b = Quality(QualityConfig(data_path=str(tmp_path)))
    ex = next(b.examples(TOK))
    predictions = ["(B)", "D", "B"]
    records = [Record(example_id=ex.id, question_id=q.id, task=ex.task, length=ex.length, score=b.score(p, q))
               for q, p in zip(ex.questions, predictions)]
    assert [r.score for r in records] == [100.0, 100.0, 0.0]
    assert b.aggregate(records) == {"accuracy": 66.67, "hard": 50.0}


def test_malformed_questions_and_rows_are_reported(tmp_path, caplog):
    bad = question("Q?", 7)
    path = write(tmp_path, [question_set("A1", "w1", [question("Q1?", 1), bad]),
                            {"article_id": "A2", "questions": []},
                            question_set("A3", "w1", [question("Q1?", 1)], article="")])
    with caplog.at_level(logging.WARNING, logger="memexp.cli.data"):
        examples = list(Quality(QualityConfig(data_path=str(path))).examples(TOK))
    assert [(e.id, len(e.questions)) for e in examples] == [("A1", 1)]
    messages = [r.getMessage() for r in caplog.records]
    assert f"{path} row 1: question 1: gold_label 7 is not in 1..4 (skipped)" in messages
    assert f"{path} row 2: missing field 'set_unique_id' (skipped)" in messages
    assert f"{path} row 3: empty field 'article' (skipped)" in messages


def test_truncation_keeps_every_question_whole(tmp_path):
    write(tmp_path, [question_set("A1", "w1", [question("Short?", 1), question("A much longer question?", 2)],
                                  article="word " * 400)])
    ex = next(Quality(QualityConfig(data_path=str(tmp_path), max_length=600)).examples(TOK))
    longest = max(len(TOK.encode(q.prompt)) for q in ex.questions)
    assert len(TOK.encode(ex.context, add_bos=True)) + longest == 600
    assert ex.context.startswith("You are provided a story")


def test_score_rejects_unparsable_answers():
    q = Question(id="0", prompt="", references=["A"], metric="accuracy", max_new_tokens=10)
    assert Quality().score("I think it is red", q) == 0.0


def test_runs_end_to_end(tmp_path):
    from helpers.memexp_process import memexp_run

    write(tmp_path, [question_set("A1", "w1", [question("Q1?", 2), question("Q2?", 4, 1)]),
                     question_set("A1", "w2", [question("Q3?", 1)])])
    summary = memexp_run(tmp_path, "bench=quality", f"bench.data_path={tmp_path}", "bench.max_new_tokens=2")
    assert summary["complete"] and (summary["num_examples"], summary["num_questions"]) == (1, 3)
    assert {"aggregate/accuracy", "aggregate/hard"} <= set(summary)
