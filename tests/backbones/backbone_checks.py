"""Checks backbone tests share: feeding ids in pieces, and a method reading a context and
answering a question through the backbone (the contract suite runs it for every arch)."""

from __future__ import annotations


def feed(backbone, pieces, state=None):
    """Forward each piece in turn from `state` (a fresh one by default); the last logits and the state."""
    state = backbone.init_state() if state is None else state
    for piece in pieces:
        logits = backbone.forward(state, piece)
    return logits, state


def pieces_of(ids, cuts):
    """`ids` cut into consecutive pieces of the lengths in `cuts`."""
    out, start = [], 0
    for n in cuts:
        out.append(ids[start:start + n])
        start += n
    return out


def check_method_end_to_end(backbone, method: str, **notebank):
    """Plain or NoteBank (`notebank` overrides its small test config) reads numbered facts and
    answers a question about them; checks the answer's length, that answering leaves the read
    state's position alone, and that NoteBank wrote and replayed notes. Returns (memory, context)."""
    from memexp.core.types import Question
    from memexp.methods import build_method
    from memexp.methods.notebank.config import NoteBankConfig
    from memexp.methods.plain.config import PlainConfig

    cfg = PlainConfig() if method == "plain" else NoteBankConfig(
        **{"chunk_size": 64, "window": 8, "tail": 8, "span_budget": 16, "address_dim": 4, **notebank})
    tok = backbone.tokenizer
    context = tok.encode(" ".join(f"Fact {i}: the code for item {i} is {7 * i + 3}." for i in range(12)), add_bos=True)
    question = Question(id="q", prompt="What is the code for item 4?", references=["31"], metric="string_match",
                        max_new_tokens=4)
    m = build_method(cfg)
    memory = m.read(backbone, context)
    position = memory.state.position
    answer = m.answer(backbone, memory, tok.encode(question.prompt), question)
    assert 1 <= len(answer.ids) <= 4
    assert memory.state.position == position
    if method == "notebank":
        assert memory.stats["notes"] > 0 and answer.tokens["replay"] > 0
    return memory, context


