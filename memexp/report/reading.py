"""Reading a run folder without changing it (shared by the report and the shard stand-in)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def read_summary(folder: Path) -> dict:
    """summary.json; for a run killed before it wrote one (SIGKILL, a lost machine), the summary
    of the records it left, marked incomplete: the report shows what was recorded, never nothing."""
    path = Path(folder) / "summary.json"
    if path.exists():
        return json.loads(path.read_text())
    from memexp.records import summarize

    return {**summarize(read_records(folder)), "complete": False}


def read_records(folder: Path) -> list[dict]:
    """records.jsonl's complete lines, first of each key. Read-only on purpose (unlike
    RunFolder.load_records, which cuts a torn last line off the file): a report must not
    change a folder that a running job may be appending to."""
    path = Path(folder) / "records.jsonl"
    if not path.exists():
        return []
    out, seen = [], set()
    for line in path.read_bytes().splitlines(keepends=True):
        if not line.endswith(b"\n"):
            break  # a record still being written
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            print(f"[memexp report] {path}: skipping a line that is not JSON", file=sys.stderr)
            continue
        key = (str(rec.get("example_id")), str(rec.get("question_id")))
        if key not in seen:
            seen.add(key)
            out.append(rec)
    return out
