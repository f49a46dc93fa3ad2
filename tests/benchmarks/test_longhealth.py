"""LongHealth: prompt, gold letters, the three tasks, parser, budget, malformed data."""

import json
import logging

import pytest

from memexp.backbones.tokenizer import ByteTokenizer
from memexp.benchmarks.longhealth.benchmark import LongHealth, gold_letter, render_context, render_prompt
from memexp.benchmarks.longhealth.config import LongHealthConfig
from memexp.core.types import Question

TOK = ByteTokenizer()


def question(i, correct_label="c", texts=("text_0",)):
    q = {"No": i, "question": f"Question {i}?", "correct": f"option {correct_label}{i}",
         "answer_location": {t: {"start": [0.1], "end": [0.2]} for t in texts}}
    q.update({f"answer_{label}": f"option {label}{i}" for label in "abcde"})
    return q


def patient(pid, n_texts=3, n_questions=2):
    return {"name": pid, "texts": {f"text_{t}": f"Letter {t} of {pid}." for t in range(n_texts)},
            "questions": [question(i) for i in range(n_questions)]}


def write(path, patients):
    path.write_text(json.dumps(patients))
    return path


def bench(path, **kw):
    return LongHealth(LongHealthConfig(data_path=str(path), **kw))


def test_prompt_matches_the_official_template():
    q = question(0)
    text = render_context(["Doc A", "Doc B"]) + render_prompt(q, "abcde")
    assert text == (
        "\n--------------BEGIN DOCUMENTS--------------\n\nDoc A\n\n--------------\n\nDoc B\n\n"
        "--------------END DOCUMENTS--------------\n\nQuestion 0?\nA: option a0\nB: option b0\nC: option c0\n"
        "D: option d0\nE: option e0\n\nPlease answer using the following format:\n1. Begin your answer with the "
        "phrase \"The correct answer is\".\n2. State the letter of the correct option (e.g., A, B, C, D, E).\n"
        "3. Follow the letter with a colon and the exact text of the option you chose.\n4. Make sure your answer is "
        "a single, concise sentence.\n\nFor example, if the correct answer to a question is option C, and the text "
        "for C is 'Acute Bronchitis', your answer should be: \n'The correct answer is C: Acute bronchitis.'\n")
    assert render_prompt(q, "abcdef").count("\nF: Question cannot be answered with provided documents\n") == 1


def test_gold_letter_is_the_first_option_containing_the_correct_text():
    q = question(0)
    q["correct"] = "option"  # every option contains it: the first wins
    assert gold_letter(q) == "A"
    assert gold_letter(question(3, correct_label="e")) == "E"


def test_task1_reads_each_patient_once_for_all_questions(tmp_path):
    path = write(tmp_path / "benchmark_v5.json", {"patient_01": patient("p1"), "patient_02": patient("p2", 4, 3)})
    examples = list(bench(path).examples(TOK))
    assert [(e.id, e.task, len(e.questions)) for e in examples] == [("task1/patient_01", "task1", 2),
                                                                    ("task1/patient_02", "task1", 3)]
    ex = examples[1]
    assert all(ex.context.count(f"Letter {t} of p2.") == 1 for t in range(4))
    assert [q.references for q in ex.questions] == [["C"], ["C"], ["C"]]
    assert ex.questions[0].max_new_tokens == 50 and ex.system.startswith("\nYou are a highly skilled")
    again = list(bench(path).examples(TOK))[1]
    other_seed = [list(bench(path, seed=s).examples(TOK))[1].context for s in range(1, 6)]
    assert again.context == ex.context  # the document order is a function of the seed
    assert any(c != ex.context for c in other_seed)


def test_tasks_2_and_3_add_distractors_and_the_unanswerable_option(tmp_path):
    path = write(tmp_path / "benchmark_v5.json", {"p1": patient("p1"), "p2": patient("p2"), "p3": patient("p3")})
    examples = list(bench(path, tasks=["task2", "task3"], num_distractors=2).examples(TOK))
    assert [e.id for e in examples[:3]] == ["task2/p1/0", "task2/p1/1", "task2/p2/0"]
    task2, task3 = examples[0], examples[6]
    assert task3.id == "task3/p1/0"
    assert task2.questions[0].references == ["C"] and task3.questions[0].references == ["F"]
    assert "Letter 0 of p1." in task2.context and "of p1." not in task3.context
    assert task2.meta["documents"] == 3 and task3.meta["documents"] == 2
    assert "\nF: Question cannot be answered with provided documents\n" in task3.questions[0].prompt


def test_score_uses_the_official_parser():
    q = Question(id="0", prompt="", references=["C"], metric="accuracy", max_new_tokens=50)
    b = LongHealth()
    assert b.score("The correct answer is C: option c0.", q) == 100.0
    assert b.score("The correct answer is C", q) == 0.0
    assert b.score("C: option c0", q) == 0.0


def test_budget_cuts_the_overflowing_letter(tmp_path):
    p = patient("p1", n_texts=3, n_questions=1)
    p["texts"] = {f"text_{t}": "x" * 300 for t in range(3)}
    path = write(tmp_path / "benchmark_v5.json", {"p1": p})
    ex = next(bench(path, max_length=1500).examples(TOK))
    prompt_len = len(TOK.encode(ex.questions[0].prompt))
    assert len(TOK.encode(ex.context, add_bos=True)) + prompt_len == 1500
    letters = ex.context.split("\n\n--------------\n\n")
    kept = [letter.count("x") for letter in letters]
    # the third letter (after the answer letter text_0 and text_1) is cut, then all are shuffled
    assert len(kept) == 3 and sorted(kept)[1:] == [300, 300] and 0 < sorted(kept)[0] < 300


def budget_patient(answer: str) -> dict:
    p = patient("p1", n_texts=5, n_questions=1)
    p["texts"] = {f"text_{t}": f"Letter {t}. " + "x" * 300 for t in range(5)}
    p["questions"] = [question(0, texts=(answer,))]
    return p


@pytest.mark.parametrize("answer", [f"text_{t}" for t in range(5)])
@pytest.mark.parametrize("task", ["task1", "task2"])
def test_a_cut_keeps_the_answer_letter_whole(tmp_path, answer, task):
    other = patient("p2", n_texts=5)
    other["texts"] = {f"text_{t}": f"Other {t}. " + "y" * 300 for t in range(5)}
    path = write(tmp_path / "benchmark_v5.json", {"p1": budget_patient(answer), "p2": other})
    for protocol in ("greedy", "official"):
        ex = next(bench(path, tasks=[task], max_length=1400, num_distractors=4, protocol=protocol).examples(TOK))
        assert len(TOK.encode(ex.context, add_bos=True)) + len(TOK.encode(ex.questions[0].prompt)) == 1400
        assert f"Letter {answer[-1]}. " + "x" * 300 in ex.context
        assert ex.meta["documents"] < 5 + 4 * (task == "task2")  # the budget did cut


def test_greedy_task1_keeps_the_answer_letters_of_every_question(tmp_path):
    p = budget_patient("text_3")
    p["questions"].append(question(1, texts=("text_1",)))
    path = write(tmp_path / "benchmark_v5.json", {"p1": p})
    ex = next(bench(path, max_length=1700).examples(TOK))
    assert "Letter 3. " + "x" * 300 in ex.context and "Letter 1. " + "x" * 300 in ex.context
    assert 3 <= ex.meta["documents"] < 5 and len(ex.questions) == 2  # the budget did cut


def test_official_protocol_asks_each_question_five_times_on_its_own_context(tmp_path):
    path = write(tmp_path / "benchmark_v5.json", {"p1": patient("p1", 6), "p2": patient("p2", 6), "p3": patient("p3")})
    examples = list(bench(path, tasks=["task1", "task2", "task3"], num_distractors=3, protocol="official",
                          num_samples=1).examples(TOK))
    ids = [e.id for e in examples]
    assert ids[:6] == [f"task1/p1/0/{j}" for j in range(5)] + ["task1/p1/1/0"]
    assert len(ids) == 3 * 2 * 5 and ids[10] == "task2/p1/0/0" and ids[20] == "task3/p1/0/0"
    assert all(len(e.questions) == 1 for e in examples)
    task1 = examples[:5]
    assert all(all(e.context.count(f"Letter {t} of p1.") == 1 for t in range(6)) for e in task1)
    assert len({e.context for e in task1}) > 1  # reshuffled per pass
    task3 = examples[20:25]
    assert all("of p1." not in e.context and e.questions[0].references == ["F"] for e in task3)
    assert len({e.context for e in task3}) > 1  # distractors resampled per pass
    task2 = examples[10:15]
    assert all("Letter 0 of p1." in e.context and e.questions[0].references == ["C"] for e in task2)


def test_protocol_is_validated():
    from memexp.core.schema import ConfigError

    with pytest.raises(ConfigError, match="bench.protocol"):
        LongHealthConfig(protocol="sampled")


def test_malformed_patients_and_questions_are_reported(tmp_path, caplog):
    good = patient("p1")
    bad_question = question(9)
    del bad_question["answer_d"]
    good["questions"].append(bad_question)
    path = write(tmp_path / "benchmark_v5.json", {"p1": good, "p2": {"texts": {}, "questions": []}})
    with caplog.at_level(logging.WARNING, logger="memexp.cli.data"):
        examples = list(bench(path).examples(TOK))
    assert [(e.id, len(e.questions)) for e in examples] == [("task1/p1", 2)]
    messages = [r.getMessage() for r in caplog.records]
    assert f"{path} row 1: patient 'p1' question 2: missing field 'answer_d' (skipped)" in messages
    assert f"{path} row 2: patient 'p2': empty field 'texts' (skipped)" in messages


@pytest.mark.parametrize("task", ["task1", "task2"])
def test_unknown_answer_location_is_reported(tmp_path, caplog, task):
    p = patient("p1", n_questions=1)
    p["questions"][0]["answer_location"] = {"text_99": {"start": [0], "end": [1]}}
    p["questions"].append(question(1))
    path = write(tmp_path / "benchmark_v5.json", {"p1": p, "p2": patient("p2")})
    with caplog.at_level(logging.WARNING, logger="memexp.cli.data"):
        examples = list(bench(path, tasks=[task]).examples(TOK))
    p1 = [(e.id, [q.id for q in e.questions]) for e in examples if "/p1" in e.id]
    assert p1 == ([("task1/p1", ["1"])] if task == "task1" else [("task2/p1/1", ["0"])])
    assert any("answer_location names unknown texts ['text_99']" in r.getMessage() for r in caplog.records)


def test_runs_end_to_end(tmp_path):
    from helpers.memexp_process import memexp_run

    path = write(tmp_path / "benchmark_v5.json", {"p1": patient("p1"), "p2": patient("p2")})
    summary = memexp_run(tmp_path, "bench=longhealth", f"bench.data_path={path}", "bench.tasks=[task1,task3]",
                         "bench.num_distractors=2", "bench.max_new_tokens=2")
    assert summary["complete"] and (summary["num_examples"], summary["num_questions"]) == (6, 8)
    assert set(summary["by_task"]) == {"task1", "task3"}
