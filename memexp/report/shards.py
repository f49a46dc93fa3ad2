"""Stand-in for memexp.shards.merge_shards (another branch): one configuration run as
`bench.shard=i/n` shards, merged into one run.

The lead replaces the one import of this module in memexp/report/runs.py with
`from memexp.shards import merge_shards` and deletes this file.
"""

from __future__ import annotations

from pathlib import Path

from memexp.records import summarize
from memexp.report.reading import read_records, read_summary


def merge_shards(folders: list[Path]) -> tuple[list[dict], dict]:
    """Every shard's records concatenated, and their summary recomputed; complete only when
    every shard is complete and all n shards of "i/n" are there (whether i counts from 0 or 1)."""
    records: list[dict] = []
    seen: set = set()
    summaries = [read_summary(Path(f)) for f in folders]
    for folder in folders:
        for rec in read_records(Path(folder)):
            key = (str(rec["example_id"]), str(rec["question_id"]))
            if key not in seen:
                seen.add(key)
                records.append(rec)
    summary = summarize(records)
    shards = {s.get("shard") for s in summaries}
    totals = {str(s).split("/")[-1] for s in shards if s}
    named = {s for s in shards if s}
    covered = len(totals) == 1 and len(named) == int(next(iter(totals))) and None not in shards
    summary["complete"] = covered and all(s.get("complete", True) for s in summaries)
    summary["shards"] = sorted(str(s) for s in shards if s)
    return records, summary
