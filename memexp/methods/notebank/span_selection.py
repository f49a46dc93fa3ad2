"""Which spans of a candidate region become notes (NoteBank paper, Sec. 3.2 and App. B.2).

A pure function of per-token scores and sentence ids, so every rule is testable without a
model. The region is one chunk plus the tail of the previous one; positions here are
region-local and spans half-open [start, end).

Rules, in the paper's order:
- the best window of `window` tokens by summed score (the whole region when shorter; ties
  go to the earliest window);
- the sentence holding the window's central token (offset length // 2) is the initial span;
- grown by whole adjacent sentences, left first then right, each only if the span stays
  within `span_budget` tokens, until neither side fits;
- a sentence longer than the budget yields a budget-long portion starting at the window
  start, moved to stay inside the sentence;
- a second note (write budget 2) is chosen the same way after excluding every sentence
  that overlaps the first (the whole sentence when the first holds only part of it); with
  nothing left, only one note is written.
Sentences cut by the region's edges count as the part inside the region.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def select_spans(scores, sentence_ids, window: int, span_budget: int, write_budget: int) -> list[tuple[int, int]]:
    """Spans of up to `write_budget` (1 or 2) notes in the region, in selection order.

    Args:
        scores: [N] per-token distinctiveness averaged over channels.
        sentence_ids: [N] non-decreasing sentence index of each token.
    """
    scores = np.asarray(scores, dtype=np.float64)
    sentences = _Sentences(np.asarray(sentence_ids))
    n = len(scores)
    if n == 0:
        return []
    first = _note(scores, sentences, [(0, n)], window, span_budget)
    spans = [first]
    if write_budget >= 2:
        excluded_start = sentences.start(first[0], 0)
        excluded_end = sentences.end(first[1] - 1, n)
        rest = [(lo, hi) for lo, hi in ((0, excluded_start), (excluded_end, n)) if hi > lo]
        if rest:
            spans.append(_note(scores, sentences, rest, window, span_budget))
    return spans


class _Sentences:
    """Sentence extents from the sorted sentence ids, clipped to a sub-region on request."""

    def __init__(self, ids: np.ndarray) -> None:
        self.ids = ids

    def start(self, pos: int, lo: int) -> int:
        return max(lo, int(np.searchsorted(self.ids, self.ids[pos], side="left")))

    def end(self, pos: int, hi: int) -> int:
        return min(hi, int(np.searchsorted(self.ids, self.ids[pos], side="right")))


def best_window(scores: np.ndarray, regions: list[tuple[int, int]], window: int) -> tuple[int, int, int]:
    """The highest-scoring window over the regions: (start, length, region index). A region
    shorter than `window` is one window; ties go to the earliest window."""
    best = None
    for r, (lo, hi) in enumerate(regions):
        length = min(window, hi - lo)
        sums = sliding_window_view(scores[lo:hi], length).sum(axis=1)
        i = int(np.argmax(sums))
        if best is None or sums[i] > best[0]:
            best = (sums[i], lo + i, length, r)
    return best[1], best[2], best[3]


def _note(scores: np.ndarray, sentences: _Sentences, regions: list[tuple[int, int]], window: int,
          budget: int) -> tuple[int, int]:
    start, length, r = best_window(scores, regions, window)
    lo, hi = regions[r]
    centre = start + length // 2
    s, e = sentences.start(centre, lo), sentences.end(centre, hi)
    if e - s > budget:
        p = min(max(start, s), e - budget)
        return p, p + budget
    while True:
        grown = False
        if s > lo:
            left = sentences.start(s - 1, lo)
            if e - left <= budget:
                s, grown = left, True
        if e < hi:
            right = sentences.end(e, hi)
            if right - s <= budget:
                e, grown = right, True
        if not grown:
            return s, e
