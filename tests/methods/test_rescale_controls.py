"""The Mamba-2 controls of the NoteBank paper (App. C.3, Table 6): Plain and JRT take
`method.rescale` at NoteBank's boundary (after the context, before what follows), and the clean
start is Plain with the recurrent state reset before the question. The expected states are made
by hand from the context's state: recurrent memories zeroed (or halved), conv windows, KV caches
and positions copied as they were."""

import pytest
import torch

from memexp.backbones import load_backbone
from memexp.backbones.stack import RecurrentState
from memexp.core.compose import load_config
from memexp.core.schema import ConfigError
from memexp.core.types import Question
from memexp.methods import build_method
from memexp.methods.jrt.config import JRTConfig
from memexp.methods.plain.config import CleanStartConfig, PlainConfig

NEW = 8


@pytest.fixture(scope="module", params=["tiny_mamba2_random", "tiny_qwen35_random"])
def setup(request):
    bb = load_backbone(request.param)
    tok = bb.tokenizer
    context = tok.encode("The grass is green. The special magic number is 4721. Here we go again. " * 6, add_bos=True)
    prompt = "What is the special magic number? Answer:"
    return bb, context, tok.encode(prompt), Question("q", prompt, ["4721"], "string_match", NEW)


def context_state(bb, context):
    state = bb.init_state()
    bb.forward(state, context)
    return state


def scaled_by_hand(state, lam: float):
    """A copy of `state` with every recurrent memory multiplied by `lam`, element by element;
    conv windows and KV caches are the clone's own copies of the originals."""
    out = state.clone()
    for layer in out.layers:
        if isinstance(layer, RecurrentState):
            layer.recurrent = torch.zeros_like(layer.recurrent) if lam == 0 else layer.recurrent * lam
    return out


def same_state(a, b) -> None:
    assert a.position == b.position and len(a.layers) == len(b.layers)
    for x, y in zip(a.layers, b.layers):
        assert type(x) is type(y)
        if isinstance(x, RecurrentState):
            torch.testing.assert_close(x.recurrent, y.recurrent, rtol=0, atol=0)
            assert (x.conv is None) == (y.conv is None)
            if x.conv is not None:
                assert torch.equal(x.conv, y.conv)
        else:  # a KV cache: its written rows
            assert x.length == y.length
            assert torch.equal(x.k[:, : x.length], y.k[:, : y.length])
            assert torch.equal(x.v[:, : x.length], y.v[:, : y.length])


def state_at_first(bb, monkeypatch, attr, run):
    """A copy of the state the first call of `bb.<attr>` (forward or generate) starts from while
    `run()` answers, and the answer."""
    seen = []
    real = getattr(bb, attr)

    def spy(state, ids, *args, **kwargs):
        if not seen:
            seen.append(state.clone())
        return real(state, ids, *args, **kwargs)

    monkeypatch.setattr(bb, attr, spy)
    answer = run()
    monkeypatch.undo()
    return seen[0], answer


def answering(bb, cfg, context, question_ids, q):
    method = build_method(cfg)
    memory = method.read(bb, context)
    return lambda: method.answer(bb, memory, question_ids, q)


@pytest.mark.parametrize("cfg,same,attr", [(PlainConfig(rescale=1.0), PlainConfig(), "generate"),
                                           (JRTConfig(rescale=1.0), JRTConfig(), "forward")], ids=["plain", "jrt"])
def test_rescale_one_is_no_rescale(setup, monkeypatch, cfg, same, attr):
    bb, context, question_ids, q = setup
    start, answer = state_at_first(bb, monkeypatch, attr, answering(bb, cfg, context, question_ids, q))
    start_same, answer_same = state_at_first(bb, monkeypatch, attr, answering(bb, same, context, question_ids, q))
    same_state(start, start_same)
    assert answer.ids == answer_same.ids


@pytest.mark.parametrize("cfg", [PlainConfig(rescale=0.0), CleanStartConfig(), PlainConfig(rescale=0.5)],
                         ids=["plain_rescale_0", "clean_start", "plain_rescale_half"])
def test_plain_rescale_answers_from_the_state_scaled_by_hand(setup, monkeypatch, cfg):
    bb, context, question_ids, q = setup
    method = build_method(cfg)
    memory = method.read(bb, context)
    kept = memory.state.clone()
    assert any(s.recurrent.abs().sum() > 0 for s in kept.layers if isinstance(s, RecurrentState))
    start, answer = state_at_first(bb, monkeypatch, "generate", lambda: method.answer(bb, memory, question_ids, q))
    expected = scaled_by_hand(context_state(bb, context), cfg.rescale)
    same_state(start, expected)
    assert answer.ids == bb.generate(expected, question_ids, NEW)
    same_state(memory.state, kept)  # the retained state is untouched


def test_jrt_rescale_applies_after_the_first_reading_before_the_second(setup, monkeypatch):
    bb, context, question_ids, q = setup
    start, answer = state_at_first(bb, monkeypatch, "forward",
                                   answering(bb, JRTConfig(rescale=0.0), context, question_ids, q))
    state = scaled_by_hand(context_state(bb, context), 0.0)
    same_state(start, state)  # the second reading starts from the reset state
    bb.forward(state, question_ids + bb.tokenizer.encode("\n\n") + context[1:])  # JRT's second reading
    assert answer.ids == bb.generate(state, question_ids, NEW)


def test_clean_start_is_a_method_with_its_own_name_and_a_number_for_lambda():
    cfg = load_config(["method=clean_start", "backbone=tiny_mamba2_random"])
    assert cfg.method == CleanStartConfig() and cfg.method.rescale == 0.0
    assert load_config(["method=clean_start", "backbone=tiny_mamba2_random", "method.rescale=0.25"]).method.rescale \
        == 0.25
    with pytest.raises(ConfigError, match=r"^method.rescale=None: must be a number in \[0, 1\]$"):
        load_config(["method=clean_start", "method.rescale=null"])
    for method in ("plain", "jrt"):
        assert load_config([f"method={method}", "method.rescale=0.0"]).method.rescale == 0.0
        with pytest.raises(ConfigError, match=r"^method.rescale=1.5: must be null or a number in \[0, 1\]$"):
            load_config([f"method={method}", "method.rescale=1.5"])
