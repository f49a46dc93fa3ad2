"""`Method.prepare(backbone)` runs once, with the loaded backbone, before any example is read."""

import memexp.run.runner as runner
from memexp.backbones.base import Backbone
from memexp.benchmarks.base import Benchmark
from memexp.core.compose import load_config
from memexp.core.types import Example, Question
from memexp.methods.plain.method import Plain


class Events:
    def __init__(self):
        self.log = []


class TwoExamples(Benchmark):
    name = "fake"

    def __init__(self, events):
        self.events = events

    def examples(self, tokenizer):
        self.events.log.append(("examples", tokenizer))
        for i in range(2):
            q = Question(id="0", prompt=" Q?", references=["x"], metric="m", max_new_tokens=2)
            yield Example(id=f"ex{i}", task="t", length=8, context="Some context.", questions=[q])

    def score(self, prediction, question):
        return 0.0


class Preparing(Plain):
    """Plain that logs prepare, read and answer, with the backbone each one is handed."""

    def __init__(self, events):
        super().__init__()
        self.events = events

    def prepare(self, backbone):
        self.events.log.append(("prepare", backbone))

    def read(self, backbone, context_ids):
        self.events.log.append(("read", backbone))
        return super().read(backbone, context_ids)

    def answer(self, backbone, memory, question_ids, question, stop=None):
        self.events.log.append(("answer", backbone))
        return super().answer(backbone, memory, question_ids, question, stop)


def _run(tmp_path, monkeypatch, events):
    monkeypatch.setattr(runner, "build_benchmark", lambda cfg: TwoExamples(events))
    monkeypatch.setattr("memexp.methods.build_method", lambda cfg: Preparing(events))
    cfg = load_config(["backbone=tiny_gdn_random", "method=plain", f"output_dir={tmp_path}", "progress=false"])
    return runner.run(cfg)


def test_prepare_runs_once_with_the_loaded_backbone_before_the_first_read(tmp_path, monkeypatch):
    events = Events()
    summary = _run(tmp_path, monkeypatch, events)
    assert summary["num_questions"] == 2
    kinds = [kind for kind, _ in events.log]
    assert kinds == ["prepare", "examples", "read", "answer", "read", "answer"]
    prepared = events.log[0][1]
    assert isinstance(prepared, Backbone) and len(prepared.channels) > 0  # loaded, not a config
    assert all(obj is prepared for kind, obj in events.log if kind in ("read", "answer"))
    assert events.log[1][1] is prepared.tokenizer  # the benchmark tokenises with the same backbone


def test_a_resumed_run_prepares_again_and_reads_nothing_recorded(tmp_path, monkeypatch):
    _run(tmp_path, monkeypatch, Events())
    events = Events()
    summary = _run(tmp_path, monkeypatch, events)
    assert summary["num_questions"] == 2 and summary["complete"]
    assert [kind for kind, _ in events.log] == ["prepare", "examples"]
