"""LongBench v1 (THUDM/LongBench, LongBench/pred.py + eval.py), the English subsets.

Each record is one example with one question. The official prompt is split right after
`{context}`: everything up to and including the document is the context read once, the
rest (question and answer cue) is the question's prompt, so context + prompt is exactly
`dataset2prompt[subset].format(**record)`. The recurrent base models of the NoteBank paper
read the prompts without chat formatting; `Question.chat_template` records pred.py's
exceptions for chat backbones.
"""

from __future__ import annotations

import zipfile
from collections import defaultdict
from pathlib import Path
from typing import Iterator

from memexp.backbones.base import Tokenizer
from memexp.benchmarks import datasets as data
from memexp.benchmarks.base import Benchmark
from memexp.benchmarks.longbench.config import LongBenchConfig
from memexp.benchmarks.longbench.tasks import CATEGORIES, TASKS, LongBenchTask
from memexp.benchmarks.metrics import classification, qa_f1, rouge_l
from memexp.benchmarks.truncation import longbench_ends, middle_truncate
from memexp.core.types import Example, Question, Record

NAME = "longbench"
LOCAL = "/path/longbench (a folder of <subset>.jsonl, as in the official data.zip)"  # what bench.data_path names
FIELDS = {"_id": str, "input": str, "context": str, "answers": list, "length": int}
METRICS = {"qa_f1": qa_f1, "rouge_l": rouge_l}


class LongBench(Benchmark):
    name = NAME

    def __init__(self, cfg: LongBenchConfig | None = None) -> None:
        self.cfg = cfg or LongBenchConfig()

    def examples(self, tokenizer: Tokenizer) -> Iterator[Example]:
        root = data.resolve(NAME, self.cfg.data_path, self.cfg.cache_dir, lambda d: fetch(self.cfg.hub_id, d),
                            LOCAL)
        # one file of every subset is read and checked once (its bad rows counted once)
        by_subset = data.rows_by_subset(data.read_rows(root), lambda r: r.get("dataset"), TASKS, "dataset") \
            if root.is_file() else None
        for name in self.cfg.tasks:
            task = TASKS[name]
            rows = by_subset.get(name, []) if by_subset is not None else subset_rows(root, name)
            fields = {**FIELDS, "all_classes": list} if task.metric == "classification" else FIELDS
            rows = data.require_rows(data.valid_rows(rows, fields, nonempty=("context",)), NAME, f"{root} ({name})")
            for row in rows[: self.cfg.num_samples]:
                yield self.example(task, row.data, tokenizer)

    def example(self, task: LongBenchTask, record: dict, tokenizer: Tokenizer) -> Example:
        context, prompt = render(task, record)
        if self.cfg.max_length is not None:
            context = middle_truncate(tokenizer, context, len(tokenizer.encode(prompt)), self.cfg.max_length,
                                      longbench_ends(self.cfg.max_length))
        meta = {"task": task.name, "all_classes": record.get("all_classes")}
        question = Question(id="0", prompt=prompt, references=list(record["answers"]), metric=task.metric,
                            max_new_tokens=self.cfg.max_new_tokens or task.max_new_tokens, meta=meta,
                            stop=["\n"] if task.stop_at_newline else [],
                            min_new_tokens=1 if task.stop_at_newline else 0, chat_template=task.chat_template)
        return Example(id=f"{task.name}/{record['_id']}", task=task.name, length=length_bucket(record["length"]),
                       context=context, questions=[question], meta={"words": record["length"]})

    def postprocess(self, generated: str, question: Question) -> str:
        if TASKS[question.meta["task"]].first_line:
            return generated.lstrip("\n").split("\n")[0]
        return generated

    def score(self, prediction: str, question: Question) -> float:
        if question.metric == "classification":
            return classification(prediction, question.references, question.meta["all_classes"])
        return METRICS[question.metric](prediction, question.references)

    def aggregate(self, records: list[Record]) -> dict[str, float]:
        """Table 1 of the NoteBank paper: mean per subset, then unweighted means of the
        subsets within each category and over all subsets."""
        by_task: dict[str, list[float]] = defaultdict(list)
        for r in records:
            by_task[r.task].append(r.score)
        means = {t: sum(s) / len(s) for t, s in by_task.items() if t in TASKS}
        out = {}
        for category in CATEGORIES:
            scores = [m for t, m in means.items() if TASKS[t].category == category]
            if scores:
                out[category] = round(sum(scores) / len(scores), 2)
        if means:
            out["overall"] = round(sum(means.values()) / len(means), 2)
        return out


def render(task: LongBenchTask, record: dict) -> tuple[str, str]:
    """(context, prompt) with context + prompt == task.template.format(**record)."""
    head, tail = task.template.split("{context}")
    return head.format(**record) + record["context"], tail.format(**record)


def length_bucket(words: int) -> str:
    """LongBench-E's buckets of the record's `length` (words)."""
    return "0-4k" if words < 4000 else "4-8k" if words < 8000 else "8k+"


def subset_rows(root: Path, name: str) -> list[data.SourceRow]:
    """A folder holds <subset>.jsonl (also under data/, as in the official zip); a single file
    holds rows of any subsets, told apart by their `dataset` field (`LongBench.examples`)."""
    for path in (root / f"{name}.jsonl", root / "data" / f"{name}.jsonl"):
        if path.is_file():
            return data.read_rows(path)
    raise data.BenchmarkDataError(f"bench={NAME}: {root / (name + '.jsonl')} not found; {data.fix_hint(NAME, LOCAL)}")


def fetch(hub_id: str, dest: Path) -> None:
    """The official data.zip from the hub; the English subsets land as <subset>.jsonl."""
    archive = data.hub_file(hub_id, "data.zip", dest / "data.zip")
    wanted = {f"{name}.jsonl" for name in TASKS}
    with zipfile.ZipFile(archive) as zf:
        for member in zf.namelist():
            base = Path(member).name
            if base in wanted:
                (dest / base).write_bytes(zf.read(member))
                wanted.discard(base)
    archive.unlink()
    if wanted:
        raise data.BenchmarkDataError(f"bench={NAME}: {hub_id} data.zip lacks {', '.join(sorted(wanted))}")


def download(cfg: LongBenchConfig) -> Path:
    return data.ensure_cached(NAME, cfg.cache_dir, lambda d: fetch(cfg.hub_id, d), LOCAL)
