"""The context around each reference answer (a needle, a gold span), kept in a question's record
so that a question view (memexp browse) shows where the answer sat without the whole context."""

from __future__ import annotations

WINDOW = 240  # characters kept on each side of an occurrence
MAX_PER_REFERENCE = 3  # occurrences of one reference (a short answer such as "yes" is everywhere)
MAX_EXCERPTS = 8


def context_excerpts(context: str, references: list[str]) -> list[dict]:
    """[{"start", "end", "text", "marks": [[start, end], ...]}]: character windows of `context`
    around the first occurrences of each reference, overlapping windows merged, in context order;
    `marks` are the occurrences, relative to the excerpt's start."""
    hits: list[tuple[int, int]] = []
    for ref in dict.fromkeys(str(r) for r in references if str(r).strip()):
        at = context.find(ref)
        for _ in range(MAX_PER_REFERENCE):
            if at < 0:
                break
            hits.append((at, at + len(ref)))
            at = context.find(ref, at + len(ref))
    windows: list[list] = []
    for s, e in sorted(hits):
        lo, hi = max(0, s - WINDOW), min(len(context), e + WINDOW)
        if windows and lo <= windows[-1][1]:
            windows[-1][1] = max(windows[-1][1], hi)
            windows[-1][2].append((s, e))
        else:
            windows.append([lo, hi, [(s, e)]])
    return [{"start": lo, "end": hi, "text": context[lo:hi], "marks": [[s - lo, e - lo] for s, e in marks]}
            for lo, hi, marks in windows[:MAX_EXCERPTS]]
