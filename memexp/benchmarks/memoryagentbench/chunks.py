"""MemoryAgentBench's chunking (utils/eval_other_utils.py chunk_text_into_sentences): split
the context into sentences, pack them greedily while the chunk's token count stays within
`chunk_size`, join each chunk's sentences with one space.

The official splitter is nltk's punkt and the counter tiktoken's gpt-4o-mini encoding
(o200k_base); both need data files downloaded once, so `python -m memexp data
bench=memoryagentbench` stores the official chunks beside the data. `approximate` chunking
(a regex splitter and the backbone's tokenizer) works anywhere, with other boundaries.
"""

from __future__ import annotations

import re
from typing import Callable

from memexp.backbones.base import Tokenizer
from memexp.benchmarks.datasets import BenchmarkDataError, fix_hint, offline

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def pack_sentences(sentences: list[str], chunk_size: int, count: Callable[[str], int]) -> list[str]:
    """The official greedy packing, quirks kept: a sentence longer than `chunk_size` that
    arrives first closes an empty chunk before it."""
    chunks: list[str] = []
    current: list[str] = []
    total = 0
    for sentence in sentences:
        n = count(sentence)
        if total + n > chunk_size:
            chunks.append(" ".join(current))
            current, total = [sentence], n
        else:
            current.append(sentence)
            total += n
    if current:
        chunks.append(" ".join(current))
    return chunks


def official_chunks(text: str, chunk_size: int) -> list[str]:
    split, count = official_tools()
    return pack_sentences(split(text), chunk_size, count)


def approximate_chunks(text: str, chunk_size: int, tokenizer: Tokenizer) -> list[str]:
    sentences = [s for s in _SENTENCE_END.split(text.strip()) if s]
    return pack_sentences(sentences, chunk_size, lambda s: len(tokenizer.encode(s)))


def official_tools() -> tuple[Callable[[str], list[str]], Callable[[str], int]]:
    """nltk.sent_tokenize and a tiktoken gpt-4o-mini token counter, or one clear error."""
    try:
        import nltk
        import tiktoken

        if not offline():
            for resource in ("punkt_tab", "punkt"):
                nltk.download(resource, quiet=True)
        nltk.sent_tokenize("Ready.")
        encoding = tiktoken.encoding_for_model("gpt-4o-mini")
    except Exception as e:
        raise BenchmarkDataError(
            f"bench=memoryagentbench: official chunking needs nltk (punkt) and tiktoken (o200k_base) "
            f"with their data ({type(e).__name__}); {fix_hint('memoryagentbench')}, "
            f"or set bench.chunker=approximate") from None

    def count(sentence: str) -> int:
        return len(encoding.encode(sentence, allowed_special={"<|endoftext|>"}))

    return nltk.sent_tokenize, count
