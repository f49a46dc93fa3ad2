"""`Record` writes exactly the JSON line the untyped runner wrote, so old run folders resume."""

import json

import pytest
import torch

import memexp.run.runner as runner
from memexp.benchmarks.base import Benchmark
from memexp.core.compose import load_config
from memexp.core.types import Example, Question, Record
from memexp.methods.base import Answer, Memory
from memexp.methods.plain.method import Plain
from memexp.run.records import RunFolder, run_folder, summarize

# A line as the untyped runner (before Record) wrote it: keys in this order, costs last.
OLD_LINE = (
    '{"example_id": "niah_single_1/1024/0", "question_id": "niah_single_1/1024/0/0", "task": "niah_single_1", '
    '"length": 1024, "prediction": "8798721.", "references": ["8798721"], "score": 100.0, '
    '"metric": "string_match_all", "tokens": {"context": 652, "question": 174, "replay": 126, "generated": 10}, '
    '"seconds": {"read": 0.061, "read/prefill_write": 0.06, "route": 0.0017, "generate": 0.0336}, '
    '"method_stats": {"notes": 2, "router": "bm25", "selected": [{"note": 1, "chunk": 0, "start": 0, "end": 60}]}, '
    '"costs": {"plain_flops": 1034190080.0, "added_flops": 156969760.0, "assumed": []}}'
)


def test_an_old_line_reads_into_a_record_and_writes_back_byte_for_byte(tmp_path):
    folder = RunFolder(tmp_path)
    folder.records_path.write_text(OLD_LINE + "\n")
    (rec,) = folder.records()
    assert (rec.key, rec.task, rec.length, rec.score) == (("niah_single_1/1024/0", "niah_single_1/1024/0/0"),
                                                          "niah_single_1", 1024, 100.0)
    assert rec.tokens["context"] == 652 and rec.method_stats["router"] == "bm25"
    assert rec.costs == {"plain_flops": 1034190080.0, "added_flops": 156969760.0, "assumed": []}
    again = RunFolder(tmp_path / "again")
    again.path.mkdir()
    again.append(rec)
    assert again.records_path.read_text() == OLD_LINE + "\n"


def test_a_record_without_costs_has_no_costs_key():
    rec = Record(example_id="e", question_id="0", task="t", length="0-4k", score=50.0)
    assert list(rec.to_json()) == ["example_id", "question_id", "task", "length", "prediction", "references",
                                   "score", "metric", "tokens", "seconds", "method_stats"]


def test_an_unknown_field_is_named():
    with pytest.raises(ValueError, match=r"\('e', '0'\): unknown fields colour"):
        Record.from_json({"example_id": "e", "question_id": "0", "task": "t", "length": 1, "score": 0.0,
                          "colour": "red"})


def test_answer_record_merges_read_and_answer_figures_as_the_runner_always_has():
    q = Question(id="q1", prompt=" Q?", references=["7"], metric="string_match_all", max_new_tokens=4)
    ex = Example(id="ex", task="niah", length=512, context="C.", questions=[q])
    memory = Memory(state=None, context_len=9, seconds={"prefill_write": 0.5}, stats={"notes": 3, "shared": "read"},
                    extra=None)
    answer = Answer(ids=[1, 2], seconds={"route": 0.25, "generate": 1.0}, stats={"router": "native", "shared": "ans"},
                    tokens={"question": 4, "generated": 2})
    rec = runner.answer_record(ex, q, "7", 100.0, 9, 0.75, memory, answer)
    assert rec.to_json() == {
        "example_id": "ex", "question_id": "q1", "task": "niah", "length": 512, "question": " Q?", "prediction": "7",
        "references": ["7"], "score": 100.0, "metric": "string_match_all",
        "tokens": {"context": 9, "question": 4, "generated": 2},
        "seconds": {"read": 0.75, "read/prefill_write": 0.5, "route": 0.25, "generate": 1.0},
        "method_stats": {"notes": 3, "shared": "ans", "router": "native"},
    }
    assert list(rec.seconds) == ["read", "read/prefill_write", "route", "generate"]
    assert list(rec.tokens) == ["context", "question", "generated"]


def test_tensor_figures_are_written_as_numbers(tmp_path):
    folder = RunFolder(tmp_path)
    folder.append(Record(example_id="e", question_id="0", task="t", length=1, score=0.0,
                         method_stats={"votes": torch.tensor(3), "scores": torch.tensor([0.5, 1.5])}))
    assert json.loads(folder.records_path.read_text())["method_stats"] == {"votes": 3, "scores": [0.5, 1.5]}


def test_summary_of_records_equals_summary_of_their_json():
    recs = [Record(example_id=str(i), question_id="0", task=t, length=n, score=s)
            for i, (t, n, s) in enumerate([("x", 256, 100.0), ("x", 1024, 0.0), ("y", 256, 50.0)])]
    assert summarize(recs) == summarize([r.to_json() for r in recs])
    assert summarize(recs)["scores"] == {"x": {"256": 100.0, "1024": 0.0}, "y": {"256": 50.0}}


class TwoQuestions(Benchmark):
    name = "fake"

    def examples(self, tokenizer):
        qs = [Question(id=str(j), prompt=f" Q{j}?", references=["x"], metric="m", max_new_tokens=2) for j in range(2)]
        yield Example(id="ex0", task="t", length=64, context="Some context.", questions=qs)

    def score(self, prediction, question):
        return 0.0


class CountingPlain(Plain):
    def __init__(self):
        super().__init__()
        self.answered = []

    def answer(self, backbone, memory, question_ids, question, stop=None):
        self.answered.append(question.id)
        return super().answer(backbone, memory, question_ids, question, stop)


def test_a_folder_with_an_old_line_resumes_after_it(tmp_path, monkeypatch):
    method = CountingPlain()
    monkeypatch.setattr(runner, "build_benchmark", lambda cfg: TwoQuestions())
    monkeypatch.setattr("memexp.methods.build_method", lambda cfg: method)
    cfg = load_config(["backbone=tiny_gdn_random", "method=plain", f"output_dir={tmp_path}", "progress=false"])
    folder = RunFolder(run_folder(cfg))
    folder.path.mkdir(parents=True)
    old = ('{"example_id": "ex0", "question_id": "0", "task": "t", "length": 64, "prediction": "x", '
           '"references": ["x"], "score": 100.0, "metric": "m", "tokens": {"context": 5, "question": 3, '
           '"generated": 1}, "seconds": {"read": 0.1, "read/prefill": 0.1, "generate": 0.2}, "method_stats": {}}\n')
    folder.records_path.write_text(old)
    summary = runner.run(cfg)
    assert method.answered == ["1"]  # question 0 came from the old line
    assert folder.records_path.read_text().startswith(old)
    assert summary["scores"] == {"t": {"64": 50.0}} and summary["complete"]  # (100 + 0) / 2
