"""Reading a run folder without changing it (shared by the report and the shard stand-in)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


class UnreadableRunError(ValueError):
    """A run folder's summary.json or records.jsonl cannot be read; one line naming the file."""


def read_summary(folder: Path) -> dict:
    """summary.json; for a run killed before it wrote one (SIGKILL, a lost machine), the summary
    of the records it left, marked incomplete: the report shows what was recorded, never nothing.
    UnreadableRunError for a summary that is not a JSON object (truncated, edited) or a file
    that cannot be opened."""
    path = Path(folder) / "summary.json"
    if path.exists():
        try:
            summary = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise UnreadableRunError(f"{path}: unreadable ({getattr(e, 'strerror', None) or e})") from None
        if not isinstance(summary, dict):
            raise UnreadableRunError(f"{path}: unreadable (a JSON {type(summary).__name__}, not an object)")
        return summary
    from memexp.run.records import summarize

    return {**summarize(read_records(folder)), "complete": False}


def read_records(folder: Path) -> list[dict]:
    """records.jsonl's complete lines, first of each key. Read-only on purpose (unlike
    RunFolder.load_records, which cuts a torn last line off the file): a report must not
    change a folder that a running job may be appending to."""
    from memexp.core.types import Record

    path = Path(folder) / "records.jsonl"
    if not path.exists():
        return []
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise UnreadableRunError(f"{path}: unreadable ({e.strerror or e})") from None
    out, seen = [], set()
    for number, line in enumerate(raw.splitlines(keepends=True), start=1):
        if not line.endswith(b"\n"):
            break  # a record still being written
        try:
            rec = json.loads(line)
            Record.from_json(rec)  # the types a table needs (a score that is a number in [0, 100], ...)
        except (ValueError, TypeError) as e:
            print(f"[memexp report] {path}:{number}: skipping a line that is not a record ({e})", file=sys.stderr)
            continue
        key = (str(rec.get("example_id")), str(rec.get("question_id")))
        if key not in seen:
            seen.add(key)
            out.append(rec)
    return out
