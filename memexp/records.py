"""The run folder: config.yaml, records.jsonl (append-only, crash-safe), summary.json.

A record is written as one line with a single append and fsync, so a run killed at any
moment leaves at most a partial last line; loading drops it and truncates the file back to
the last complete record, so the next append never glues onto garbage.

In memory a record is a `Record`. Its JSON object (`Record.to_json` / `Record.from_json`, the
one conversion) is what `RunFolder.load_records` returns and what `RunFolder.append` and
`summarize` also accept, for records read straight from a file or written by hand.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import defaultdict
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

# Fields that change how a run is watched or scheduled, not what it computes.
_NOT_IN_HASH = ("logger", "progress", "threads", "output_dir", "max_examples", "kernels", "paths", "metric")


@dataclass(kw_only=True)
class Record:
    """One answered question: one line of records.jsonl.

    The field order is the JSON key order of the line; the optional fields (`question`,
    `costs`) are left out of the line when None, so records written before they existed load
    and compare unchanged. The identity, task, length and score are what a
    summary needs; the rest default to empty so a record made by hand (a test, another tool)
    may leave them out.
    """

    example_id: str
    question_id: str
    task: str
    length: int | str
    question: str | None = None  # the text read after the context (the question's prompt)
    prediction: str = ""
    references: list[str] = field(default_factory=list)
    score: float
    metric: str = ""
    tokens: dict[str, int] = field(default_factory=dict)  # tokens read per kind; "context" first
    seconds: dict[str, float] = field(default_factory=dict)  # "read", "read/<stage>", then answer stages
    method_stats: dict[str, Any] = field(default_factory=dict)  # JSON-serialisable method figures
    costs: dict[str, Any] | None = None  # memexp.costs per-record figures, or {"error": ...}

    @property
    def key(self) -> tuple[str, str]:
        return (str(self.example_id), str(self.question_id))

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)
                if not (f.name in _OPTIONAL and getattr(self, f.name) is None)}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Record:
        unknown = sorted(set(obj) - _RECORD_FIELDS)
        if unknown:
            raise ValueError(f"record {record_key(obj)}: unknown fields {', '.join(unknown)}")
        return cls(**obj)


_RECORD_FIELDS = frozenset(f.name for f in fields(Record))
_OPTIONAL = ("question", "costs")


def config_hash(cfg_dict: dict) -> str:
    """Short, stable hash of everything that determines the results."""
    semantic = {k: v for k, v in cfg_dict.items() if k not in _NOT_IN_HASH}
    bench = semantic.get("bench")
    if isinstance(bench, dict) and "shard" in bench and bench["shard"] is None:
        # unsharded runs keep the folders they had before bench.shard existed
        semantic["bench"] = {k: v for k, v in bench.items() if k != "shard"}
    blob = json.dumps(semantic, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def run_folder(cfg) -> Path:
    """outputs/runs/<bench>/<backbone>/<method>/<hash>, deterministic from the config."""
    d = asdict(cfg)
    return Path(cfg.output_dir) / cfg.bench.name / cfg.backbone.name / cfg.method.name / config_hash(d)


class RunFolder:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.records_path = self.path / "records.jsonl"
        self.summary_path = self.path / "summary.json"

    def prepare(self, cfg_dict: dict) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        _atomic_write(self.path / "config.yaml", yaml.safe_dump(cfg_dict, sort_keys=False))

    def records(self) -> list[Record]:
        """Complete records already on disk, first of each key (see `load_records`)."""
        return [Record.from_json(obj) for obj in self.load_records()]

    def load_records(self) -> list[dict]:
        """JSON objects of the complete records already on disk, the first of each key; a partial
        trailing line is cut off the file."""
        if not self.records_path.exists():
            return []
        raw = self.records_path.read_bytes()
        good_end = raw.rfind(b"\n") + 1
        records, seen, keep_end = [], set(), 0
        offset = 0
        for line in raw[:good_end].splitlines(keepends=True):
            offset += len(line)
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                break
            key = record_key(rec)
            if key not in seen:
                seen.add(key)
                records.append(rec)
            keep_end = offset
        if keep_end != len(raw):
            with open(self.records_path, "r+b") as f:
                f.truncate(keep_end)
                f.flush()
                os.fsync(f.fileno())
        return records

    def append(self, record: Record | Mapping[str, Any]) -> None:
        obj = record.to_json() if isinstance(record, Record) else record
        line = (json.dumps(obj, ensure_ascii=False, default=_jsonable) + "\n").encode()
        fd = os.open(self.records_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def write_summary(self, summary: dict) -> None:
        _atomic_write(self.summary_path, json.dumps(summary, indent=2, default=_jsonable) + "\n")

    def read_text(self, name: str) -> str | None:
        p = self.path / name
        return p.read_text().strip() if p.exists() else None

    def write_text(self, name: str, text: str) -> None:
        _atomic_write(self.path / name, text)


def record_key(rec: Mapping[str, Any]) -> tuple[str, str]:
    """A record's JSON object's (example id, question id), as `Record.key`."""
    return (str(rec["example_id"]), str(rec["question_id"]))


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
    return "\n".join(lines)


def _length_order(length: str):
    try:
        return (0, int(length), "")
    except ValueError:
        return (1, 0, length)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _jsonable(x: Any) -> Any:
    """Tensors and numpy values as numbers (tolist: a number for one element, lists for more)."""
    if hasattr(x, "tolist"):
        return x.tolist()
    return str(x)
