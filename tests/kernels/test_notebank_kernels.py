"""NoteBank on the tiny backbone writes and routes the same with memexp's kernels as with the
PyTorch references (the kernels reached through `memexp.kernels.dispatch`, as in a run)."""

from dataclasses import replace

import pytest
import torch

from memexp.backbones import backbone_config, load_backbone
from memexp.core.types import Question
from memexp.kernels import dispatch
from memexp.methods import build_method
from memexp.methods.notebank.config import NoteBankConfig


def test_notebank_same_notes_and_answer_with_kernels(device, monkeypatch):
    if device.type == "cuda":
        pytest.skip("on CUDA kernels=auto also moves the backbone to FLA's kernels; the kernel tests cover CUDA")
    from memexp.kernels.distinctiveness import triton as distinctiveness_kernels
    from memexp.kernels.routing import triton as routing_kernels

    backbone = load_backbone(replace(backbone_config("tiny_gdn_random"), device=device.type))
    tok = backbone.tokenizer
    text = " ".join(f"Item {i} is stored in box {i * 7 % 13}." for i in range(40))
    context = tok.encode(text, add_bos=True)
    question = tok.encode("Which box holds item 17?")
    q = Question(id="q", prompt="Which box holds item 17?", references=[], metric="none", max_new_tokens=8)
    method = build_method(NoteBankConfig(chunk_size=64))
    launched = []
    for module, name in ((routing_kernels, "route_votes_triton"),
                         (distinctiveness_kernels, "chunk_distinctiveness_triton")):
        kernel = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _k=kernel, _n=name, **kw: launched.append(_n) or _k(*a, **kw))

    def run(mode: str):
        monkeypatch.setattr(dispatch, "_mode", mode)
        memory = method.read(backbone, context)
        return memory, method.answer(backbone, memory, question, q, stop=[])

    ref_memory, ref_answer = run("torch")
    assert launched == []
    memory, answer = run("auto")  # kernels for memexp's ops: CUDA tensors, or CPU in the interpreter
    assert set(launched) == {"route_votes_triton", "chunk_distinctiveness_triton"}
    assert ref_memory.stats["notes"] > 2
    assert torch.equal(memory.extra.spans, ref_memory.extra.spans)
    assert torch.equal(memory.extra.addresses, ref_memory.extra.addresses)
    assert answer.stats["selected"] == ref_answer.stats["selected"]
    assert answer.ids == ref_answer.ids
