"""Truncating a context by tokens, counted the way memexp feeds a prompt: the context with
BOS (`tokenizer.encode(context, add_bos=True)`), then the question without.

The official scripts truncate the whole prompt and decode it back to text; here the
question is never cut (it is shared text after the context), so the tokens kept from the
end of the prompt are the question's plus the context's last ones.
"""

from __future__ import annotations

from memexp.backbones.base import Tokenizer


def longbench_ends(max_length: int) -> tuple[int, int]:
    """LongBench/pred.py: half = int(max_length / 2) tokens from each end."""
    half = int(max_length / 2)
    return half, half


def longbench_v2_ends(max_length: int) -> tuple[int, int]:
    """LongBench v2 pred.py: ids[:max_len // 2] + ids[-max_len // 2:]; the second slice
    starts at -ceil(max_len / 2), so an odd budget keeps one more token at the end."""
    return max_length // 2, max_length - max_length // 2


def middle_truncate(tokenizer: Tokenizer, context: str, question_len: int, max_length: int,
                    ends: tuple[int, int]) -> str:
    """The context text after middle truncation of context + question to `max_length`.

    When len(context ids with BOS) + question_len > max_length, the prompt keeps its first
    `ends[0]` tokens (BOS included, as a tokenizer that adds BOS counts it) and its last
    `ends[1]`; the two context pieces are decoded separately and joined, as the official
    code does. A question longer than its share keeps whole and shortens the head."""
    ids = tokenizer.encode(context, add_bos=True)
    if len(ids) + question_len <= max_length:
        return context
    head, tail = ends
    tail -= question_len
    if tail < 0:
        head, tail = max(head + tail, 0), 0
    bos = 1 if tokenizer.bos_id is not None and ids[:1] == [tokenizer.bos_id] else 0
    kept_tail = tokenizer.decode(ids[len(ids) - tail:]) if tail else ""
    return tokenizer.decode(ids[bos:max(head, bos)]) + kept_tail


def keep_last(tokenizer: Tokenizer, text: str, max_tokens: int) -> str:
    """MemoryAgentBench agent.py: the text's last `max_tokens` tokens (no BOS counted)."""
    ids = tokenizer.encode(text)
    return text if len(ids) <= max_tokens else tokenizer.decode(ids[len(ids) - max_tokens:])
