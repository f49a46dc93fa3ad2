"""NoteBank writer rules (App. B.2) on hand-made scores and sentences with known answers."""

import numpy as np

from memexp.methods.notebank.span_selection import best_window, select_spans


def sentences(*lengths: int) -> np.ndarray:
    """Sentence ids for consecutive sentences of the given token lengths."""
    return np.repeat(np.arange(len(lengths)), lengths)


def bump(n: int, *ranges_and_values) -> np.ndarray:
    """Scores of n tokens: zero except value v on [a, b) for each (a, b, v)."""
    s = np.zeros(n)
    for a, b, v in ranges_and_values:
        s[a:b] = v
    return s


def test_best_window_is_highest_sum_and_earliest_on_ties():
    scores = bump(100, (60, 70, 1.0))
    assert best_window(scores, [(0, 100)], 10) == (60, 10, 0)
    twin = bump(100, (20, 30, 1.0), (60, 70, 1.0))
    assert best_window(twin, [(0, 100)], 10) == (20, 10, 0)


def test_window_covers_a_region_shorter_than_it():
    scores = bump(20, (3, 5, 1.0))
    assert best_window(scores, [(0, 20)], 48) == (0, 20, 0)
    # a short region still competes by its whole sum against full windows elsewhere
    scores = bump(30, (0, 4, 1.0), (10, 30, 0.1))
    assert best_window(scores, [(0, 4), (10, 30)], 8) == (0, 4, 0)


def test_note_is_the_sentence_of_the_windows_central_token():
    # five sentences of 10 tokens; the window [24, 28) has its centre (26) in sentence 2
    scores = bump(50, (24, 28, 1.0))
    assert select_spans(scores, sentences(10, 10, 10, 10, 10), window=4, span_budget=10, write_budget=1) == [(20, 30)]


def test_central_token_decides_when_the_window_straddles_sentences():
    # window [8, 12) straddles sentences 0 and 1; its centre 10 is in sentence 1
    scores = bump(30, (8, 12, 1.0))
    assert select_spans(scores, sentences(10, 10, 10), window=4, span_budget=10, write_budget=1) == [(10, 20)]


def test_growth_takes_the_left_sentence_first_within_the_budget():
    # left and right neighbours each fit alone (20 tokens) but not together (30 > 25)
    scores = bump(50, (24, 28, 1.0))
    assert select_spans(scores, sentences(10, 10, 10, 10, 10), window=4, span_budget=25, write_budget=1) == [(10, 30)]


def test_growth_alternates_left_then_right_until_neither_fits():
    # A[0,3) B[3,6) C[6,8) D[8,12) E[12,14) F[14,17); start in D, budget 13:
    # +C (6), +E (8), +B (11), F would make 14, A would make 14 -> [3, 14)
    scores = bump(17, (9, 11, 1.0))
    assert select_spans(scores, sentences(3, 3, 2, 4, 2, 3), window=2, span_budget=13, write_budget=1) == [(3, 14)]


def test_growth_skips_nothing_and_stops_at_the_region_edge():
    scores = bump(12, (0, 2, 1.0))
    assert select_spans(scores, sentences(4, 4, 4), window=2, span_budget=100, write_budget=1) == [(0, 12)]


def test_long_sentence_keeps_a_budget_portion_from_the_window_start():
    # sentence [5, 45) is longer than B = 16; the window [10, 18) starts inside it
    scores = bump(50, (10, 18, 1.0))
    assert select_spans(scores, sentences(5, 40, 5), window=8, span_budget=16, write_budget=1) == [(10, 26)]


def test_long_sentence_portion_moves_to_stay_inside_the_sentence():
    # the window [30, 38) would run the portion past the sentence end 45: it moves back to [29, 45)
    scores = bump(50, (30, 38, 1.0))
    assert select_spans(scores, sentences(5, 40, 5), window=8, span_budget=16, write_budget=1) == [(29, 45)]
    # the window [1, 9) starts before the sentence holding its centre: the portion starts at 5
    scores = bump(50, (1, 9, 1.0))
    assert select_spans(scores, sentences(5, 40, 5), window=8, span_budget=16, write_budget=1) == [(5, 21)]


def test_second_note_excludes_every_sentence_overlapping_the_first():
    # note 1: sentence 3 grown left to [20, 40). What is left is [0, 20) and [40, 50); the best
    # window there is in sentence 1, which grows left to [0, 20) but never into [20, 40)
    scores = bump(50, (34, 38, 3.0), (22, 26, 2.5), (12, 16, 2.0), (42, 44, 1.0))
    spans = select_spans(scores, sentences(10, 10, 10, 10, 10), window=4, span_budget=20, write_budget=2)
    assert spans == [(20, 40), (0, 20)]


def test_second_note_ignores_the_rest_of_a_partially_noted_long_sentence():
    # long sentence [10, 60); note 1 is a 16-token portion of it. Its second bump (50-56)
    # outscores the bump at 62-66 but belongs to the excluded sentence
    scores = bump(70, (30, 38, 5.0), (50, 56, 4.0), (62, 66, 1.0))
    spans = select_spans(scores, sentences(10, 50, 10), window=8, span_budget=16, write_budget=2)
    assert spans[0] == (30, 46)
    assert spans[1] == (60, 70)


def test_single_note_when_nothing_is_left_after_exclusion():
    scores = bump(40, (10, 14, 1.0))
    # one long sentence: the partial note excludes all of it
    assert select_spans(scores, sentences(40), window=4, span_budget=16, write_budget=2) == [(10, 26)]
    # the first note already holds every sentence of the region
    assert select_spans(scores, sentences(20, 20), window=4, span_budget=64, write_budget=2) == [(0, 40)]


def test_write_budget_two_gives_disjoint_notes():
    rng = np.random.default_rng(0)
    for _ in range(50):
        lengths = rng.integers(1, 30, size=20)
        scores = rng.random(int(lengths.sum()))
        spans = select_spans(scores, sentences(*lengths), window=48, span_budget=64, write_budget=2)
        assert 1 <= len(spans) <= 2
        for s, e in spans:
            assert 0 <= s < e <= len(scores) and e - s <= 64
        if len(spans) == 2:
            (a, b), (c, d) = spans
            assert b <= c or d <= a
