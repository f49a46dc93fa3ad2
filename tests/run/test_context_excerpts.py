"""A record keeps the context around each reference answer (memexp.run.excerpts): windows around
the first occurrences, overlapping ones merged, the occurrences marked."""

from memexp.run import excerpts
from memexp.run.excerpts import context_excerpts


def test_windows_around_each_reference_merge_and_mark_the_occurrences(monkeypatch):
    monkeypatch.setattr(excerpts, "WINDOW", 5)
    context = "aaaaaaaaaa NEEDLE bbbbbbbbbbbbbbbbbbbb 42 cc 42 dddddddddddddddddddd"
    got = context_excerpts(context, ["NEEDLE", "42", "absent", ""])
    needle = context.index("NEEDLE")
    first, second = context.index("42"), context.index("42", context.index("42") + 2)
    assert [(g["start"], g["end"]) for g in got] == [(needle - 5, needle + 6 + 5), (first - 5, second + 2 + 5)]
    assert got[0]["text"] == context[needle - 5:needle + 11] and got[0]["marks"] == [[5, 11]]
    assert got[1]["marks"] == [[5, 7], [second - first + 5, second - first + 7]]
    assert [g["text"][s:e] for g in got for s, e in g["marks"]] == ["NEEDLE", "42", "42"]


def test_no_reference_in_the_context_keeps_nothing():
    assert context_excerpts("nothing here", ["7"]) == []
