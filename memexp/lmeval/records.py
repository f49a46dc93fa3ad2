"""memexp records of an lm-eval run, scored with lm-eval's own per-sample metrics.

The model appends one memexp record per answered request to the run folder's answers.jsonl
(tokens, seconds, method figures, costs; score pending). lm-eval then scores each document
with its task's `process_results`; its logged samples carry those per-sample values.
`finish` joins the two into records.jsonl + summary.json (+ config.yaml), so `memexp report`
reads lm-eval runs like memexp's own.

A sample's score is, in this order: its `score` metric (lm-eval's LongBench), the metric named
after the document's `max_length` (lm-eval's RULER keys its metrics by length and sets the
others to -1), else its first numeric metric other than -1; lm-eval's per-sample values are in
[0, 1] for these tasks and memexp's records are in [0, 100], hence x100. A sample without a
numeric metric is left out of records.jsonl and counted in the summary (`unscored`): its score
is only in lm-eval's results.json, and a record's score is always a number in [0, 100].
"""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path
from typing import Any

from memexp.core.types import Record
from memexp.run.records import RunFolder, summarize

ANSWERS = "answers.jsonl"


def append_answer(run_dir: Path, record: Record) -> None:
    """One answered request, appended (and fsynced) as memexp's records are."""
    folder = RunFolder(run_dir)
    folder.records_path = Path(run_dir) / ANSWERS  # RunFolder's crash-safe append, to the answers file
    folder.append(record)


def _answers(run_dir: Path) -> dict[str, Record]:
    """The model's records by example id (a document's first request)."""
    path = Path(run_dir) / ANSWERS
    out: dict[str, Record] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                rec = Record.from_json(json.loads(line))
                out.setdefault(str(rec.example_id), rec)
    return out


PENDING = "lm-eval:pending"  # the metric of an answer lm-eval has not scored yet (answers.jsonl)


def sample_score(sample: dict[str, Any]) -> tuple[str, float]:
    """(metric name, score in [0, 100]) of one lm-eval logged sample; ("none", NaN) without a numeric metric."""
    names = list(sample.get("metrics") or [])
    length = str((sample.get("doc") or {}).get("max_length"))
    for name in ("score", length, *names):
        value = sample.get(name)
        if name in names and isinstance(value, (int, float)) and not isinstance(value, bool) and value != -1:
            return name, 100.0 * float(value)
    return "none", math.nan


def _references(target: Any) -> list[str]:
    """lm-eval logs a list-valued `doc_to_target` template ("{{outputs}}") as the list's repr."""
    if isinstance(target, str) and target.startswith("["):
        try:
            target = ast.literal_eval(target)
        except (ValueError, SyntaxError):
            return [target]
    if isinstance(target, (list, tuple)):
        return [str(t) for t in target]
    return [] if target is None else [str(target)]


def sample_records(run_dir: Path, samples: dict[str, list[dict]]) -> tuple[list[Record], int]:
    """One record per (task, document): the model's record, scored from lm-eval's sample; and how
    many samples had no numeric metric (left out)."""
    answers = _answers(run_dir)
    records, unscored = [], 0
    for task, rows in samples.items():
        seen = set()
        for s in rows:
            doc_id = s["doc_id"]
            if doc_id in seen:  # one line per filter: the first filter's scores
                continue
            seen.add(doc_id)
            example_id = f"{task}/{doc_id}"
            doc = s.get("doc") or {}
            length = doc["max_length"] if isinstance(doc.get("max_length"), int) else "all"
            metric, score = sample_score(s)
            if math.isnan(score):
                unscored += 1
                continue
            rec = answers.get(example_id) or Record(example_id=example_id, question_id=f"{example_id}/0",
                                                    task=task, length=length, score=score)
            resps = s.get("filtered_resps") or []
            rec.prediction = str(resps[0]) if resps else rec.prediction
            rec.references = _references(s.get("target"))
            rec.score, rec.metric = score, f"lm-eval:{metric}"
            records.append(rec)
    return records, unscored


def finish(run_dir: Path, config: dict, samples: dict[str, list[dict]], results: dict | None = None) -> dict:
    """Write config.yaml, records.jsonl (rewritten: one lm-eval evaluation) and summary.json; the summary."""
    folder = RunFolder(run_dir)
    folder.prepare(config)
    records, unscored = sample_records(run_dir, samples)
    folder.records_path.unlink(missing_ok=True)
    for rec in records:
        folder.append(rec)
    summary = summarize(records)
    summary["num_examples"] = len(records)
    summary["complete"] = True
    summary["unscored"] = unscored  # samples without a numeric metric: scored in lm_eval_results only
    if results is not None:
        summary["lm_eval_results"] = results.get("results", {})
    folder.write_summary(summary)
    return summary


def read_samples(output_path: Path, since: float) -> dict[str, list[dict]]:
    """lm-eval's logged samples (samples_<task>_<date>.jsonl under `output_path`) written after `since`."""
    samples: dict[str, list[dict]] = {}
    for path in sorted(Path(output_path).rglob("samples_*.jsonl")):
        if path.stat().st_mtime < since:
            continue
        task = path.stem[len("samples_"):].rsplit("_", 1)[0]
        samples[task] = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return samples


def read_results(output_path: Path, since: float) -> dict | None:
    """lm-eval's results_<date>.json under `output_path` written after `since` (the newest)."""
    found = [p for p in Path(output_path).rglob("results_*.json") if p.stat().st_mtime >= since]
    return json.loads(max(found, key=lambda p: p.stat().st_mtime).read_text()) if found else None
