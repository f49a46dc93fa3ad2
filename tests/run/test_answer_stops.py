"""A question's stop strings reach decoding as token ids and end its answer there."""

from memexp.backbones import load_backbone
from memexp.benchmarks.base import Benchmark
from memexp.core.types import Example, Question
from memexp.methods.base import Answer
from memexp.methods.plain.method import Plain
from memexp.run.runner import answer_stop_ids, run_example


class OneDialogue(Benchmark):
    name = "fake"

    def examples(self, tokenizer):
        return iter(())

    def score(self, prediction, question):
        return 100.0 * (prediction == question.references[0])


class ScriptedAnswer(Plain):
    """Emits a fixed text token by token, ending at the first id in `stop`, as greedy decoding would."""

    def __init__(self, text):
        super().__init__()
        self.text, self.stops = text, []

    def answer(self, backbone, memory, question_ids, question, stop=None):
        self.stops.append(stop)
        ended = set(backbone.tokenizer.stop_ids if stop is None else stop)
        out = []
        for i in backbone.tokenizer.encode(self.text):
            out.append(i)
            if i in ended and len(out) > question.min_new_tokens:
                break
        return Answer(ids=out, seconds={}, tokens={"generated": len(out)})


def test_newline_stop_ends_the_answer_and_is_not_scored():
    backbone = load_backbone("tiny_gdn_random")
    tok = backbone.tokenizer
    samsum = Question(id="0", prompt="Summary:", references=["Tom met Ann."], metric="m", max_new_tokens=32,
                      stop=["\n"], min_new_tokens=1)
    plain = Question(id="1", prompt="Summary:", references=["Tom met Ann."], metric="m", max_new_tokens=32)
    assert answer_stop_ids(tok, samsum) == [*tok.stop_ids, tok.encode("\n")[-1]]
    assert answer_stop_ids(tok, plain) is None
    method = ScriptedAnswer("\nTom met Ann.\nThen they left.")
    ex = Example(id="d", task="samsum", length="0-4k", context="Tom: hi\nAnn: hi", questions=[samsum, plain])
    first, second = run_example(ex, backbone, method, OneDialogue())
    assert method.stops == [answer_stop_ids(tok, samsum), None]
    # min_new_tokens=1 lets the leading newline through; the next one ends the answer
    assert first.prediction == "\nTom met Ann." and first.tokens["generated"] == len("\nTom met Ann.\n")
    assert second.prediction == "\nTom met Ann.\nThen they left."
