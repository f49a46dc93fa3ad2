"""With backbone.chat=true the chat template wraps context + question as one user turn, split
so the context (with the template's head) is still read once per example."""

import memexp.runner as runner
from memexp.app import load_config
from memexp.backbones.base import chat_split
from memexp.backbones.gdn.model import GDNBackbone
from memexp.benchmarks.base import Benchmark, Example, Question
from memexp.methods.plain import Plain


def toy_template(self, user, system=None):
    return (f"[SYS]{system}[/SYS]" if system else "") + f"<user>{user}</user><assistant>"


class Recorder(Plain):
    def __init__(self):
        super().__init__()
        self.contexts, self.questions, self.first_ids = [], [], []

    def read(self, backbone, context_ids):
        self.contexts.append(backbone.tokenizer.decode(context_ids))
        self.first_ids.append(context_ids[0])
        return super().read(backbone, context_ids)

    def answer(self, backbone, memory, question_ids, question, stop=None):
        self.questions.append(backbone.tokenizer.decode(question_ids))
        return super().answer(backbone, memory, question_ids, question, stop)


class TwoExamples(Benchmark):
    name = "fake"

    def examples(self, tokenizer):
        q = [Question(id=str(j), prompt=f" Q{j}?", references=["x"], metric="m", max_new_tokens=2) for j in range(2)]
        yield Example(id="chat", task="t", length=1, context="Doc.", questions=q, system="Be brief.")
        raw = [Question(id="0", prompt=" Q?", references=["x"], metric="m", max_new_tokens=2,
                        chat_template=False)]
        yield Example(id="raw", task="t", length=1, context="Doc.", questions=raw)

    def score(self, prediction, question):
        return 0.0


def load_backbone_bos():
    from memexp.backbones import load_backbone

    return load_backbone("tiny_gdn_random").tokenizer.bos_id


def test_chat_split_puts_the_template_head_with_the_context_and_the_tail_with_the_question(monkeypatch):
    monkeypatch.setattr(GDNBackbone, "chat_prompt", toy_template)
    from memexp.backbones import load_backbone

    bb = load_backbone("tiny_gdn_random")
    head, tail = chat_split(bb, "Doc.", " Q?", "S")
    assert (head, tail) == ("[SYS]S[/SYS]<user>Doc.", " Q?</user><assistant>")
    assert head + tail == toy_template(bb, "Doc. Q?", "S")


def test_runner_wraps_prompts_only_when_asked_and_not_for_opted_out_questions(tmp_path, monkeypatch):
    monkeypatch.setattr(GDNBackbone, "chat_prompt", toy_template)
    method = Recorder()
    monkeypatch.setattr(runner, "build_benchmark", lambda cfg: TwoExamples())
    monkeypatch.setattr("memexp.methods.build_method", lambda cfg: method)
    cfg = load_config(["backbone=tiny_gdn_random", "backbone.chat=true", "method=plain", f"output_dir={tmp_path}",
                       "progress=false"])
    runner.run(cfg)
    assert method.contexts == ["[SYS]Be brief.[/SYS]<user>Doc.", "Doc."]
    bos = load_backbone_bos()
    assert method.first_ids[0] != bos and method.first_ids[1] == bos  # the template carries its own start
    assert method.questions == [" Q0?</user><assistant>", " Q1?</user><assistant>", " Q?"]
