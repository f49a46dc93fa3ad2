"""Checks every backbone's tests share: feeding ids in pieces, and a method reading a context
and answering a question through the backbone."""

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
    from memexp.benchmarks.base import Question
    from memexp.config import NoteBankConfig, PlainConfig
    from memexp.methods import build_method

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


def branch_and_continue(backbone, vocab: int = 300):
    """Reads 20 random ids, clones the state, advances the clone by 5 ids, then continues the
    original to 30; checks the original ends as one uninterrupted read would, so the clone
    shared nothing it wrote. Returns (original, clone)."""
    import torch

    ids = torch.randint(0, vocab, (30,))
    _, base = feed(backbone, [ids[:20]])
    branch = base.clone()
    backbone.forward(branch, ids[20:25])
    after_base, _ = feed(backbone, [ids[20:]], base)
    torch.testing.assert_close(after_base, feed(backbone, [ids])[0], atol=1e-5, rtol=1e-5)
    return base, branch
