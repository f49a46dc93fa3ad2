"""Sentence boundaries for NoteBank's writer, straight from token ids.

The paper splits the observed text at sentence-final punctuation and line breaks (App. B.2).
Decoding the context to find them would cost a decode per token per read; instead each token
id is decoded once per tokenizer and its verdict ("a sentence ends after this token") kept in
a lookup table, so a chunk's boundaries are one gather.
"""

from __future__ import annotations

import weakref

import torch

from memexp.backbones.base import Tokenizer

SENTENCE_FINAL = (".", "!", "?", "…", "。", "！", "？")
# Closing quotes and brackets may follow the punctuation that ends a sentence: `He said "no."`
CLOSERS = " \t\"')]}»”’"


def ends_sentence(token_text: str) -> bool:
    """Whether a sentence ends after a token with this text."""
    return "\n" in token_text or token_text.rstrip(CLOSERS).endswith(SENTENCE_FINAL)


class SentenceEndTable:
    """Per-token-id "ends a sentence" flags of one tokenizer, filled as new ids appear (each
    id is decoded once for the tokenizer's lifetime)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.known = torch.zeros(0, dtype=torch.bool)
        self.ends = torch.zeros(0, dtype=torch.bool)

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        """Flags [T] (bool, CPU) for the 1-D id tensor `ids`."""
        ids = ids.detach().to("cpu", torch.long)
        if ids.numel() == 0:
            return torch.zeros(0, dtype=torch.bool)
        self._grow(int(ids.max()) + 1)
        unseen = torch.unique(ids[~self.known[ids]])
        if unseen.numel():
            self.ends[unseen] = torch.tensor([ends_sentence(self.tokenizer.decode([i])) for i in unseen.tolist()])
            self.known[unseen] = True
        return self.ends[ids]

    def _grow(self, size: int) -> None:
        if size > self.known.numel():
            pad = size - self.known.numel()
            self.known = torch.cat([self.known, torch.zeros(pad, dtype=torch.bool)])
            self.ends = torch.cat([self.ends, torch.zeros(pad, dtype=torch.bool)])


_tables: "weakref.WeakKeyDictionary[Tokenizer, SentenceEndTable]" = weakref.WeakKeyDictionary()


def sentence_end_table(tokenizer: Tokenizer) -> SentenceEndTable:
    """The one table of `tokenizer`, shared by every read."""
    table = _tables.get(tokenizer)
    if table is None:
        table = _tables[tokenizer] = SentenceEndTable(tokenizer)
    return table


def sentence_ids(ends: torch.Tensor) -> torch.Tensor:
    """Sentence index [T] (int64, non-decreasing from 0) of each token, given which tokens end
    a sentence: a new sentence starts right after every ending token."""
    ends = ends.to(torch.long)
    return torch.cumsum(ends, 0) - ends
