"""With backbone.chat=true the chat template wraps context + question as one user turn, split
so the context (with the template's head) is still read once per example."""

import memexp.run.runner as runner
from memexp.backbones.base import chat_split
from memexp.backbones.gdn.model import GDNBackbone
from memexp.benchmarks.base import Benchmark
from memexp.core.compose import load_config
from memexp.core.types import Example, Question
from memexp.methods.plain.method import Plain


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


class RulerLike(Benchmark):
    """One RULER question: the prompt ends with its answer prefix."""

    name = "fake"
    question = " What is the number for k?"
    prefix = " The special magic number for k mentioned in the provided text is"

    def examples(self, tokenizer):
        q = Question(id="0", prompt=self.question + self.prefix, references=["1"], metric="m", max_new_tokens=2,
                     answer_prefix=self.prefix)
        yield Example(id="ruler", task="t", length=1, context="Haystack.", questions=[q])

    def score(self, prediction, question):
        return 0.0


def run_ruler_like(tmp_path, monkeypatch, chat: bool) -> Recorder:
    monkeypatch.setattr(GDNBackbone, "chat_prompt", toy_template)
    method = Recorder()
    monkeypatch.setattr(runner, "build_benchmark", lambda cfg: RulerLike())
    monkeypatch.setattr("memexp.methods.build_method", lambda cfg: method)
    cfg = load_config(["backbone=tiny_gdn_random", f"backbone.chat={str(chat).lower()}", "method=plain",
                       f"output_dir={tmp_path}", "progress=false"])
    runner.run(cfg)
    return method


def test_answer_prefix_follows_the_assistant_header_with_a_chat_template(tmp_path, monkeypatch):
    method = run_ruler_like(tmp_path, monkeypatch, chat=True)
    assert method.contexts == ["<user>Haystack."]
    assert method.questions == [RulerLike.question + "</user><assistant>" + RulerLike.prefix]


def test_answer_prefix_stays_at_the_end_of_the_prompt_without_chat(tmp_path, monkeypatch):
    method = run_ruler_like(tmp_path, monkeypatch, chat=False)
    assert method.questions == [RulerLike.question + RulerLike.prefix]


def test_answer_prefix_must_end_the_prompt():
    import pytest

    with pytest.raises(ValueError, match="answer_prefix ' Answer:' does not end its prompt"):
        Question(id="q", prompt=" Answer: x", references=[], metric="m", max_new_tokens=1, answer_prefix=" Answer:")


def test_ruler_questions_carry_the_templates_answer_prefix(tmp_path):
    import json

    from memexp.backbones.tokenizer import ByteTokenizer
    from memexp.benchmarks.ruler.benchmark import Ruler
    from memexp.benchmarks.ruler.config import RulerConfig

    essay = tmp_path / "essay.json"
    essay.write_text(json.dumps({"text": "Most good ideas look bad at first. That is why they are still available. " * 40}))
    expected = {
        "niah_single_2": " The special magic number for {key} mentioned in the provided text is",
        "niah_multivalue": " The special magic numbers for {key} mentioned in the provided text are",
        "cwe": " Answer: The top 10 words that appear most often in the list are:",
        "fwe": " Answer: According to the coded text above, the three most frequently appeared words are:",
    }
    ruler = Ruler(RulerConfig(tasks=list(expected), lengths=[2200], num_samples=1, essay_path=str(essay),
                              cache_dir=str(tmp_path / "cache")))
    for task, prefix in expected.items():
        q = ruler.task_examples(task, 2200, ByteTokenizer())[0].questions[0]
        key = q.prompt.split(" for ")[1].split(" mentioned")[0] if "{key}" in prefix else ""
        assert q.answer_prefix == prefix.format(key=key)
        assert q.user_prompt + q.answer_prefix == q.prompt
        assert not q.user_prompt.endswith(" ")  # the prefix keeps its leading space
