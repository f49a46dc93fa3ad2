"""memexp's InfLLM against the official code (thunlp/InfLLM @ 12b7079, its torch attention path on
a Hugging Face Llama patched by its patch.py): the same tiny random Llama, the same calls, the same
blocks retrieved by every query chunk of every layer and the same logits after every call.

The fixtures in data/infllm_parity/ were generated once by
    python scripts/check/infllm_parity_fixtures.py /path/to/InfLLM
(transformers 4.37.2, fp32 on a CPU; the script's docstring says how the official code ran there)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from memexp.backbones import load_backbone
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


def test_the_method_reads_and_answers_as_the_official_calls_do(official):
    """read (the context in prefill chunks) + answer (question but its last token, the last token,
    then greedy steps) is the official call sequence: the same greedy tokens."""
    bb, method = converted(official["settings"])
    memory = method.read(bb, official["context"])
    n = len(official["generated"])
    answer = method.answer(bb, memory, official["question"], Question("q", "", ["x"], "string_match", n), stop=[])
    assert answer.ids == official["generated"]
