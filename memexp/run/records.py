"""The run folder: config.yaml, records.jsonl (append-only, crash-safe), summary.json.

A record is written as one line with a single append and fsync, so a run killed at any
moment leaves at most a partial last line; loading drops it and truncates the file back to
the last complete record, so the next append never glues onto garbage. A complete line that is
not a record (a disk error, an edit by hand) is never dropped in silence: loading stops with
`RecordsCorruptError` naming the file and line, or, with `repair=True`, moves every bad line to
records.bad.jsonl and keeps every good record.

In memory a record is a `Record`. Its JSON object (`Record.to_json` / `Record.from_json`, the
one conversion) is what `RunFolder.load_records` returns and what `RunFolder.append` and
`summarize` also accept, for records read straight from a file or written by hand.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from memexp.core.atomic import atomic_write
from memexp.core.types import Record, record_key


def config_hash(cfg_dict: dict) -> str:
    """Short, stable hash of everything that determines the results (memexp.run.identity)."""
    from memexp.run.identity import identity, identity_hash

    return identity_hash(identity(cfg_dict))


def run_folder(cfg) -> Path:
    """outputs/runs/<bench>/<backbone>/<method>/<key>, the key from the run's identity."""
    from memexp.run.identity import run_key

    return folder_path(cfg, run_key(cfg)[0])


def folder_path(cfg, key: str) -> Path:
    return Path(cfg.output_dir) / cfg.bench.name / cfg.backbone.name / cfg.method.name / key


class RecordsCorruptError(RuntimeError):
    """A complete line of records.jsonl is not a record; one line naming the file, the line and the fix."""


class RunFolder:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.records_path = self.path / "records.jsonl"
        self.summary_path = self.path / "summary.json"

    def prepare(self, cfg_dict: dict) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path / "config.yaml", yaml.safe_dump(cfg_dict, sort_keys=False))

    def records(self, repair: bool = False) -> list[Record]:
        """Complete records already on disk, first of each key (see `load_records`)."""
        return [Record.from_json(obj) for obj in self.load_records(repair)]

    def load_records(self, repair: bool = False) -> list[dict]:
        """JSON objects of the complete records already on disk, the first of each key; a partial
        trailing line is cut off the file. A complete line that is not a record raises
        RecordsCorruptError, or with `repair` goes to records.bad.jsonl (see the module docstring)."""
        if not self.records_path.exists():
            return []
        raw = self.records_path.read_bytes()
        good_end = raw.rfind(b"\n") + 1
        if good_end != len(raw):  # a torn last line: the one write a kill can cut short
            with open(self.records_path, "r+b") as f:
                f.truncate(good_end)
                f.flush()
                os.fsync(f.fileno())
        records, seen, bad = [], set(), []
        for number, line in enumerate(raw[:good_end].splitlines(keepends=True), start=1):
            problem, rec = _parse_record(line)
            if problem is not None:
                if not repair:
                    raise RecordsCorruptError(
                        f"{self.records_path}:{number}: not a record ({problem}); rerun with records_repair=true to "
                        f"move bad lines to {self.bad_path.name} and keep every good record")
                bad.append(line)
                continue
            key = record_key(rec)
            if key not in seen:
                seen.add(key)
                records.append(rec)
        if bad:
            self._move_bad_lines(raw[:good_end], bad)
        return records

    @property
    def bad_path(self) -> Path:
        return self.path / "records.bad.jsonl"

    def _move_bad_lines(self, raw: bytes, bad: list[bytes]) -> None:
        """Append `bad` to records.bad.jsonl (synced first, so a kill never loses a line), then
        rewrite records.jsonl without them."""
        with open(self.bad_path, "ab") as f:
            f.write(b"".join(bad))
            f.flush()
            os.fsync(f.fileno())
        drop = set(bad)
        kept = b"".join(line for line in raw.splitlines(keepends=True) if line not in drop)
        atomic_write(self.records_path, kept)

    def append(self, record: Record | Mapping[str, Any]) -> None:
        """One line, whole or not at all: a write the disk cuts short (full, quota) is taken back
        before the error goes up, so the file still ends in a complete record. The one writer
        (memexp.run.lock) makes the size before the write the place to cut back to."""
        obj = record.to_json() if isinstance(record, Record) else record
        line = (json.dumps(obj, ensure_ascii=False, default=_jsonable) + "\n").encode()
        fd = os.open(self.records_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            start = os.fstat(fd).st_size
            try:
                written = 0
                while written < len(line):  # a short write is not an error by itself
                    written += os.write(fd, line[written:])
                os.fsync(fd)
            except BaseException as e:  # a full disk, or Ctrl-C in the middle of the line
                os.ftruncate(fd, start)
                if isinstance(e, OSError):  # named, so that the one-line error says which file
                    raise OSError(e.errno, e.strerror, str(self.records_path)) from None
                raise
        finally:
            os.close(fd)

    def write_summary(self, summary: dict) -> None:
        atomic_write(self.summary_path, json.dumps(summary, indent=2, default=_jsonable) + "\n")

    def read_text(self, name: str) -> str | None:
        p = self.path / name
        return p.read_text().strip() if p.exists() else None

    def write_text(self, name: str, text: str) -> None:
        atomic_write(self.path / name, text)


def summarize(records: Iterable[Record | Mapping[str, Any]]) -> dict[str, Any]:
    """Mean score by task x length and overall, like the papers' tables (scores in [0, 100]).
    Records may come as their JSON objects (as records.jsonl holds them)."""
    cells: dict[tuple[str, str], list[float]] = defaultdict(list)
    by_task: dict[str, list[float]] = defaultdict(list)
    all_scores: list[float] = []
    flops = {"added": 0.0, "plain": 0.0}
    storage: list[float] = []
    typed = (r if isinstance(r, Record) else Record.from_json(r) for r in records)
    for r in typed:
        cells[(r.task, str(r.length))].append(r.score)
        by_task[r.task].append(r.score)
        all_scores.append(r.score)
        costs = r.costs or {}
        if costs.get("added_flops") is not None and costs.get("plain_flops"):
            flops["added"] += costs["added_flops"]
            flops["plain"] += costs["plain_flops"]
        if costs.get("storage_bytes") is not None:
            storage.append(costs["storage_bytes"])
    table: dict[str, dict[str, float]] = defaultdict(dict)
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    for (task, length), scores in sorted(cells.items(), key=lambda kv: (kv[0][0], _length_order(kv[0][1]))):
        table[task][length] = round(sum(scores) / len(scores), 2)
        counts[task][length] = len(scores)
    lengths = sorted({length for _, length in cells}, key=_length_order)
    by_length = {
        length: round(sum(s for (t, l_), ss in cells.items() if l_ == length for s in ss)
                      / sum(len(ss) for (t, l_), ss in cells.items() if l_ == length), 2)
        for length in lengths
    }
    out: dict[str, Any] = {
        "scores": dict(table),
        "counts": dict(counts),
        "by_task": {t: round(sum(s) / len(s), 2) for t, s in sorted(by_task.items())},
        "by_length": by_length,
        "overall": round(sum(all_scores) / len(all_scores), 2) if all_scores else None,
        "num_questions": len(all_scores),
    }
    if flops["plain"]:
        out["added_flops_ratio"] = 100.0 * flops["added"] / flops["plain"]  # percent, NoteBank Eq. 16
    if storage:
        out["mean_storage_bytes"] = sum(storage) / len(storage)
    return out


def format_table(summary: dict, title: str = "") -> str:
    """The task x length table printed at the end of a run."""
    scores = summary.get("scores") or {}
    lengths = list(summary.get("by_length") or {})
    if not scores:
        return f"{title}\n(no records)"
    w = max(12, *(len(t) for t in scores)) + 2
    head = "task".ljust(w) + "".join(str(n).rjust(9) for n in lengths) + "     mean".rjust(9)
    lines = [title, head, "-" * len(head)] if title else [head, "-" * len(head)]
    for task, row in scores.items():
        cells = "".join((f"{row[n]:9.2f}" if n in row else "        -") for n in lengths)
        lines.append(task.ljust(w) + cells + f"{summary['by_task'][task]:9.2f}")
    lines.append("-" * len(head))
    lines.append("mean".ljust(w) + "".join(f"{summary['by_length'][n]:9.2f}" for n in lengths) + f"{summary['overall']:9.2f}")
    costs = []
    if summary.get("added_flops_ratio") is not None:
        costs.append(f"added FLOPs {summary['added_flops_ratio']:.4g} % of Plain")
    if summary.get("mean_storage_bytes") is not None:
        costs.append(f"persistent storage {summary['mean_storage_bytes'] / 2**20:.3g} MiB")
    if costs:
        lines.append("(analytical: " + "; ".join(costs) + ")")
    lines.extend(_status_lines(summary))
    return "\n".join(lines)


def _status_lines(summary: dict) -> list[str]:
    """What the table does not show: skipped data rows, and a run that stopped short."""
    out = []
    skipped = summary.get("skipped_rows") or {}
    if skipped.get("total"):
        reasons = "; ".join(f"{reason} ({item['count']})" for reason, item in skipped["by_reason"].items())
        out.append(f"skipped data rows: {skipped['total']} ({reasons}); files and lines in summary.json")
    if summary.get("complete") is False:
        out.append(f"incomplete: {summary.get('num_examples')} examples of the benchmark's "
                   f"{summary.get('expected_examples', '?')} read")
    return out


def _length_order(length: str):
    try:
        return (0, int(length), "")
    except ValueError:
        return (1, 0, length)


def _parse_record(line: bytes) -> tuple[str | None, dict | None]:
    """(None, the record's JSON object), or (what is wrong with the line, None)."""
    try:
        obj = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        return f"invalid JSON: {getattr(e, 'msg', e)}", None
    if not isinstance(obj, dict):
        return f"a JSON {type(obj).__name__}, not an object", None
    try:
        Record.from_json(obj)
    except (TypeError, ValueError) as e:
        return str(e).splitlines()[0], None
    return None, obj


def _jsonable(x: Any) -> Any:
    """Tensors and numpy values as numbers (tolist: a number for one element, lists for more)."""
    if hasattr(x, "tolist"):
        return x.tolist()
    return str(x)
