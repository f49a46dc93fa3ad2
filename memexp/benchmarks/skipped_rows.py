"""Data rows a loader skipped, counted for the run's summary (or, strict, turned into an error).

Loaders report a skipped row through `memexp.benchmarks.datasets.report`, which hands it here.
The runner opens a collector for the run (`with collecting(strict) as skipped:`); the summary's
`skipped_rows` is `skipped.summary()`. Outside a run (a test building a benchmark) reports are
only logged, as before.
"""

from __future__ import annotations

import re
from collections import defaultdict
from contextlib import contextmanager
from typing import Any, Iterator

MAX_LISTED = 100  # rows listed per reason in summary.json (all of them are counted)

# "patient 'p1' question 3: missing field 'x'" -> "missing field 'x'": the location is the row's,
# the reason is what summary.json groups by. "not valid JSON (Expecting ...)" -> "not valid JSON".
_LOCATION = re.compile(r"^(?:patient '[^']*'\s*)?(?:question \d+)?:\s+")
_DETAIL = re.compile(r"\s*\(.*\)$")


class StrictDataError(ValueError):
    """A row was skipped under strict_data=true; one line naming the file, row and problem."""


class SkippedRows:
    def __init__(self, strict: bool = False) -> None:
        self.strict = strict
        self.rows: dict[str, list[dict[str, Any]]] = defaultdict(list)

    def add(self, source: str, row: int, problem: str) -> None:
        """`row`: 1-based (the line of a .jsonl file, the item of a .json file)."""
        if self.strict:
            raise StrictDataError(f"{source} row {row}: {problem}; fix the row, or drop strict_data=true "
                                  f"to skip it (it is counted in summary.json)")
        self.rows[reason(problem)].append({"file": source, "row": row, "problem": problem})

    def summary(self) -> dict[str, Any]:
        by_reason = {r: {"count": len(rows), "rows": rows[:MAX_LISTED]} for r, rows in sorted(self.rows.items())}
        return {"total": sum(len(rows) for rows in self.rows.values()), "by_reason": by_reason}


def reason(problem: str) -> str:
    return _DETAIL.sub("", _LOCATION.sub("", problem)) or problem


_active: list[SkippedRows] = []


@contextmanager
def collecting(strict: bool = False) -> Iterator[SkippedRows]:
    collector = SkippedRows(strict)
    _active.append(collector)
    try:
        yield collector
    finally:
        _active.remove(collector)


def add(source: str, row: int, problem: str) -> None:
    """Count a skipped row in the run's collector, if a run is collecting."""
    if _active:
        _active[-1].add(source, row, problem)
