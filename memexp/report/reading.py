"""Reading a run folder without changing it (shared by the report and the shard stand-in)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def read_summary(folder: Path) -> dict:
    return json.loads((Path(folder) / "summary.json").read_text())


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
