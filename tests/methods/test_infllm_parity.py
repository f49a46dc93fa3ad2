"""memexp's InfLLM against the official code (thunlp/InfLLM @ 12b7079, its torch attention path on
a Hugging Face Llama patched by its patch.py, answering with its GreedySearch): the same tiny random
Llama, the same calls, the same blocks retrieved by every query chunk of every layer and the same
logits after every call; and read once + answer per question gives the greedy tokens of the official
whole-prompt run (context + question) for every question.

The fixtures in data/infllm_parity/ were generated once by
    python scripts/check/infllm_parity_fixtures.py /path/to/InfLLM
(transformers 4.37.2, fp32 on a CPU; the script's docstring says how the official code ran there)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from memexp.backbones import load_backbone
from memexp.backbones.stack import StackState
from memexp.core.types import Question
from memexp.methods.infllm.config import InfLLMConfig
from memexp.methods.infllm.method import InfLLM

DATA = Path(__file__).parent / "data" / "infllm_parity"


@pytest.fixture(scope="module")
def official():
    return json.loads((DATA / "expected.json").read_text())


def converted(settings: dict):
    bb = load_backbone({"name": "infllm_parity", "arch": "llama", "pretrained": str(DATA), "tokenizer": "byte"})
    method = InfLLM(InfLLMConfig(**settings))
    method.prepare(bb)
    return bb, method


def test_the_fixture_exercises_retrieval(official):
    s = official["settings"]
    assert official["blocks"] == [15, 15] and all(len(r) == 24 for r in official["retrieved"])
    # more blocks than topk: the later query chunks chose among them
    assert any(len(r) == s["topk"] for r in official["retrieved"][0])
    assert len({tuple(r) for r in official["retrieved"][0] if len(r) == s["topk"]}) > 3


def test_the_fixture_is_the_whole_prompt_and_tells_the_orders_apart(official):
    """GreedySearch fed context + question as one prompt (pieces of chunk_size, the last token alone):
    the context's end and the question's start share a query chunk. Its greedy tokens differ from
    those of the official code fed the context on its own first (memexp's order before issue 52)."""
    prompt, chunk = official["context"] + official["question"], official["settings"]["chunk_size"]
    assert [len(c) for c in official["calls"][:10]] == [chunk] * 8 + [len(prompt) - 1 - 8 * chunk, 1]
    assert sum(official["calls"][:10], []) == prompt
    assert len(official["context"]) % official["settings"]["exc_block_size"]  # a chunk straddles both
    assert official["generated"] != official["separate_question"]["generated"]


def test_same_retrieved_blocks_and_logits_call_by_call(official):
    bb, _ = converted(official["settings"])
    state = bb.init_state()
    for layer in state.layers:
        layer.record_retrieval = True
    for call, expected in zip(official["calls"], official["logits"], strict=True):
        logits = bb.forward(state, call)
        assert torch.allclose(logits, torch.tensor(expected), atol=1e-5, rtol=1e-5)
    for layer, expected in zip(state.layers, official["retrieved"], strict=True):
        assert layer.retrieved == expected
        assert len(layer.blocks) == official["blocks"][0]


def test_read_and_answer_retrieve_as_the_official_whole_prompt_run(official, monkeypatch):
    """read (the context up to its last query-chunk boundary) + answer (the context's tail and the
    question but its last token, the last token, greedy steps): the official greedy tokens, and the
    blocks every query chunk retrieved, read's and answer's together, are the official run's."""
    bb, method = converted(official["settings"])
    fresh = bb.init_state

    def recording_state():
        state = fresh()
        for layer in state.layers:
            layer.record_retrieval = True  # copied by clone, so answer's copy records too
        return state

    answered, clone = [], StackState.clone

    def kept_clone(self):  # answer's copy of the memory, kept to read what it retrieved
        copy = clone(self)
        answered.append(copy)
        return copy

    monkeypatch.setattr(bb, "init_state", recording_state)
    monkeypatch.setattr(StackState, "clone", kept_clone)
    memory = method.read(bb, official["context"])
    n = len(official["generated"])
    answer = method.answer(bb, memory, official["question"], Question("q", "", ["x"], "string_match", n), stop=[])
    assert answer.ids == official["generated"]
    # GreedySearch feeds its last token once more after the last step; memexp does not
    for layer, expected in zip(answered[-1].layers, official["retrieved"], strict=True):
        assert layer.retrieved == expected[:-1]


def test_one_read_answers_every_question_as_its_whole_prompt_run(official):
    """Read once per context, answer each of its questions from copies: each gets the greedy tokens of
    the official run on its own whole prompt (a one-token question, one whose prompt crosses a
    chunk_size piece, a context that ends on a query-chunk boundary)."""
    bb, method = converted(official["settings"])
    runs = [{"context": len(official["context"]), "question": official["question"],
             "generated": official["generated"]}] + official["answers"]
    for length in sorted({run["context"] for run in runs}):
        memory = method.read(bb, official["context"][:length])
        for run in [r for r in runs if r["context"] == length]:
            n = len(run["generated"])
            answer = method.answer(bb, memory, run["question"], Question("q", "", ["x"], "string_match", n), stop=[])
            assert answer.ids == run["generated"], (length, len(run["question"]))
