"""JRT-Prompt: the context and question are read twice before generation."""

import torch
from helpers.notebank_toy_backbone import ToyBackbone

from memexp.core.types import Question
from memexp.methods.jrt.config import JRTConfig
from memexp.methods.jrt.method import JRT


def test_jrt_reads_context_question_separator_context_question():
    bb = ToyBackbone()
    tok = bb.tokenizer
    tok.bos_id = tok.index["<s>"]
    context = tok.encode("the sky is blue . the code of zebra is seven .", add_bos=True)
    question_ids = tok.encode("tell me about zebra ?")
    q = Question("q", "tell me about zebra ?", ["seven"], "string_match", 5)
    jrt = JRT(JRTConfig(separator="\n"))
    memory = jrt.read(bb, context)
    before = memory.state.clone()
    answer = jrt.answer(bb, memory, question_ids, q)
    prompt = context + question_ids + tok.encode("\n") + context[1:] + question_ids
    assert answer.ids == bb.generate(bb.init_state(), prompt, 5)
    assert torch.equal(memory.state.memory, before.memory) and memory.state.position == before.position
    assert answer.tokens == {"question": 10, "reread": len(tok.encode("\n")) + len(context) - 1, "generated": len(answer.ids)}
    assert set(memory.seconds) == {"prefill"} and set(answer.seconds) == {"reread", "generate"}


def test_jrt_separator_is_configurable_and_may_be_empty():
    bb = ToyBackbone()
    tok = bb.tokenizer
    context = tok.encode("the sky is blue .")
    question_ids = tok.encode("what ?")
    q = Question("q", "what ?", [], "string_match", 3)
    answer = JRT(JRTConfig(separator="")).answer(bb, JRT().read(bb, context), question_ids, q)
    assert answer.ids == bb.generate(bb.init_state(), context + question_ids + context + question_ids, 3)
    assert answer.tokens["reread"] == len(context)
