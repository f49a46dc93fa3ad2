"""The essay haystack: the first n words of the essay text, split into sentences.

RULER (niah.py) collapses all whitespace of the essays to single spaces, splits on " "
into words, takes the first n words (repeating the whole text when n is larger) and runs
sent_tokenize on them. Every example of one (task, length) uses the same n, so the split
of each n is computed once.
"""

from __future__ import annotations

import re
from collections import OrderedDict

from memexp.benchmarks.ruler.sentences import split_sentences


class EssayHaystack:
    def __init__(self, text: str, memo_size: int = 4) -> None:
        self.words = re.sub(r"\s+", " ", text).split(" ")
        self._memo: OrderedDict[int, list[str]] = OrderedDict()
        self._memo_size = memo_size

    def text(self, num_words: int) -> str:
        if num_words <= len(self.words):
            return " ".join(self.words[:num_words])
        repeats = -(-num_words // len(self.words))
        return " ".join((self.words * repeats)[:num_words])

    def sentences(self, num_words: int) -> list[str]:
        """The sentences of the first `num_words` words (callers must not mutate them)."""
        if num_words in self._memo:
            self._memo.move_to_end(num_words)
            return self._memo[num_words]
        sentences = split_sentences(self.text(num_words).strip())
        self._memo[num_words] = sentences
        if len(self._memo) > self._memo_size:
            self._memo.popitem(last=False)
        return sentences
