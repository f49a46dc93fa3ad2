"""NoteBank, JRT and Plain end to end on the random-weight tiny GDN backbone."""

import json

import pytest

from memexp.backbones import load_backbone
from memexp.core.types import Question
from memexp.methods import build_method
from memexp.methods.jrt.config import JRTConfig
from memexp.methods.notebank.config import NoteBankConfig
from memexp.methods.plain.config import PlainConfig


@pytest.fixture(scope="module")
def backbone():
    # a shipped model that does not load is a failure, never a skip
    return load_backbone("tiny_gdn_random")


@pytest.mark.parametrize("cfg", [PlainConfig(), JRTConfig(), NoteBankConfig(),
                                 NoteBankConfig(chunk_size=256, rescale=0.0, replay_budget=4),
                                 NoteBankConfig(router="bm25", replay_budget=1)], ids=lambda c: c.name)
def test_method_runs_end_to_end(backbone, cfg):
    tok = backbone.tokenizer
    text = "The grass is green. The sky is blue.\n" * 25 + "The special magic number is 4721. " + \
        "Here we go again. " * 25
    context = tok.encode(text, add_bos=True)
    question = Question("q", "What is the special magic number? Answer:", ["4721"], "string_match", 6)
    method = build_method(cfg)
    memory = method.read(backbone, context)
    first = method.answer(backbone, memory, tok.encode(question.prompt), question)
    again = method.answer(backbone, memory, tok.encode(question.prompt), question)
    assert 1 <= len(first.ids) <= 6
    assert first.ids == again.ids and first.stats == again.stats
    assert memory.state.position == len(context)
    json.dumps([memory.stats, memory.seconds, first.stats, first.seconds, first.tokens])
    if cfg.name == "notebank":
        assert 0 < memory.stats["notes"] <= cfg.write_budget * (len(context) // cfg.chunk_size)
        assert 0 < first.stats["replay_note_tokens"] <= cfg.replay_budget * cfg.span_budget
        assert len(first.stats["selected"]) == min(cfg.replay_budget, memory.stats["notes"])
