"""Each context is read once; every question answers from a copy of the retained state."""

import json

import memexp.run.runner as runner
from memexp.benchmarks.base import Benchmark
from memexp.core.compose import load_config
from memexp.core.types import Example, Question
from memexp.methods.plain.method import Plain


class ThreeQuestions(Benchmark):
    name = "fake"

    def examples(self, tokenizer):
        for i in range(2):
            qs = [Question(id=str(j), prompt=f" Question {j}?", references=["x"], metric="m", max_new_tokens=4)
                  for j in range(3)]
            yield Example(id=f"ex{i}", task="t", length=64, context="Some context. " * 8, questions=qs)

    def score(self, prediction, question):
        return 100.0 * ("x" in prediction)


class CountingPlain(Plain):
    def __init__(self):
        super().__init__()
        self.reads, self.answers = 0, 0

    def read(self, backbone, context_ids):
        self.reads += 1
        return super().read(backbone, context_ids)

    def answer(self, backbone, memory, question_ids, question, stop=None):
        self.answers += 1
        before = memory.state.clone()
        out = super().answer(backbone, memory, question_ids, question, stop)
        for name in ("recurrent", "conv"):
            a, b = getattr(before, name, None), getattr(memory.state, name, None)
            if a is not None:
                assert all(x is None or bool((x == y).all()) for x, y in zip(a, b)), "answering changed the state"
        assert memory.state.position == before.position
        return out


def test_context_read_once_per_example_and_state_untouched(tmp_path, monkeypatch):
    method = CountingPlain()
    monkeypatch.setattr(runner, "build_benchmark", lambda cfg: ThreeQuestions())
    monkeypatch.setattr("memexp.methods.build_method", lambda cfg: method)
    cfg = load_config(["backbone=tiny_gdn_random", "method=plain", f"output_dir={tmp_path}", "progress=false"])
    summary = runner.run(cfg)
    assert (method.reads, method.answers) == (2, 6)
    assert summary["num_questions"] == 6
    records = [json.loads(x) for x in next(tmp_path.rglob("records.jsonl")).read_text().splitlines()]
    by_example = {}
    for r in records:
        by_example.setdefault(r["example_id"], []).append(r["prediction"])
    # same context, questions differ only in a digit: answers come from the same retained state
    assert set(by_example) == {"ex0", "ex1"} and all(len(v) == 3 for v in by_example.values())
