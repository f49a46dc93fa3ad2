"""MemoryAgentBench (HUST-AI-HYZ/MemoryAgentBench) as its long-context agent sees it.

Per row (one context, many questions; main.py "inject once, query multiple times"): the
context is chunked, each chunk wrapped in the family's memorise template and appended to
the agent's memory as "\\n" + wrapped chunk, the memory stripped after each append
(agent.py `_handle_long_context_agent`; see `memory_text`); every question is then asked as
memory + "\\n" + query. So the Example's context is the memory text and each prompt is
"\\n" + query. The agent's system message goes to Example.system for methods that
apply a chat template; the plain text the backbone reads has none.

Scoring (utils/eval_other_utils.py, README metric table): substring exact match on the
normalised text; ruler_qa and factconsolidation take the max over the raw output and the
parsed one (text after "Answer:", else the first line), eventqa scores the parsed one.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Iterator

from memexp.backbones.base import Tokenizer
from memexp.benchmarks import datasets as data
from memexp.benchmarks.base import Benchmark
from memexp.benchmarks.memoryagentbench.chunks import (
    approximate_chunks,
    official_chunks,
    official_tools,
    pack_sentences,
)
from memexp.benchmarks.memoryagentbench.config import MemoryAgentBenchConfig
from memexp.benchmarks.memoryagentbench.tasks import FAMILIES, SYSTEM_MESSAGE, TASKS, MabTask
from memexp.benchmarks.metrics import mab_parse_output, substring_exact_match
from memexp.benchmarks.truncation import keep_last
from memexp.core.types import Example, Question, Record

NAME = "memoryagentbench"
LOCAL = "/path/memoryagentbench (a folder of <source>.jsonl)"  # what bench.data_path names
MIN_CONTEXT_CHARS = 2000  # conversation_creator.py asserts every context is longer
BUFFER_LENGTH = 4000  # the long-context agent configs' buffer_length
TRUNCATION_SLACK = 50000  # agent.py truncates only when the window <= context_max_length + this
CHUNKS_FIELD = "memexp_chunks"  # {"chunk_size": n, "chunks": [...]} stored by `memexp data`


class MemoryAgentBench(Benchmark):
    name = NAME

    def __init__(self, cfg: MemoryAgentBenchConfig | None = None) -> None:
        self.cfg = cfg or MemoryAgentBenchConfig()

    def examples(self, tokenizer: Tokenizer) -> Iterator[Example]:
        root = data.resolve(NAME, self.cfg.data_path, self.cfg.cache_dir, lambda d: fetch(self.cfg, d),
                            LOCAL)
        # one file of every source is read and checked once (its bad rows counted once)
        by_source = data.rows_by_subset(data.read_rows(root), _source, TASKS, "metadata.source") \
            if not root.is_dir() else None
        for source in self.cfg.tasks:
            task = TASKS[source]
            rows = by_source.get(source, []) if by_source is not None else source_rows(root, source)
            rows = [r for r in rows if _well_formed(r)]
            rows = data.require_rows(rows, NAME, f"{root} ({source})")
            for row in rows[: task.max_contexts]:
                yield self.example(task, row, tokenizer)

    def example(self, task: MabTask, row: data.SourceRow, tokenizer: Tokenizer) -> Example:
        family = FAMILIES[task.family]
        context = memory_text(family.memorize.format(time_stamp=self.cfg.time_stamp, context=chunk)
                              for chunk in self.chunks(row.data, tokenizer))
        context = self.truncate(context, task, tokenizer)
        questions = [
            Question(id=str(i), prompt="\n" + family.query.format(question=q), references=refs,
                     metric="substring_exact_match", max_new_tokens=task.max_new_tokens,
                     meta={"family": task.family, "source": task.source})
            for i, (q, refs) in enumerate(qa_pairs(row.data))
        ]
        return Example(id=f"{task.source}/{row.index}", task=task.table, length=task.length, context=context,
                       questions=questions[: self.cfg.max_questions], system=SYSTEM_MESSAGE)

    def chunks(self, record: dict, tokenizer: Tokenizer) -> list[str]:
        cfg = self.cfg
        if cfg.chunker == "approximate":
            return approximate_chunks(record["context"], cfg.chunk_size, tokenizer)
        stored = record.get(CHUNKS_FIELD)
        if isinstance(stored, dict) and stored.get("chunk_size") == cfg.chunk_size:
            return list(stored["chunks"])
        return official_chunks(record["context"], cfg.chunk_size)

    def truncate(self, context: str, task: MabTask, tokenizer: Tokenizer) -> str:
        """agent.py: with a window no larger than context_max_length + 50000, keep the last
        context_max_length tokens, then the last (window - buffer - generation) tokens."""
        limit = self.cfg.input_length_limit
        if limit is None:
            return context
        window = limit - BUFFER_LENGTH - task.max_new_tokens
        if window > task.context_max_length + TRUNCATION_SLACK:
            return context
        return keep_last(tokenizer, keep_last(tokenizer, context, task.context_max_length), max(window, 1))

    def score(self, prediction: str, question: Question) -> float:
        parsed = mab_parse_output(prediction) or ""
        if FAMILIES[question.meta["family"]].parsed_only:
            return substring_exact_match(parsed, question.references)
        return max(substring_exact_match(prediction, question.references),
                   substring_exact_match(parsed, question.references))

    def aggregate(self, records: list[Record]) -> dict[str, float]:
        """NoteBank paper Table 6: accuracy per configuration, averaged within each column
        and over all configurations."""
        configs: dict[tuple[str, str], list[float]] = defaultdict(list)
        for r in records:
            configs[(r.task, str(r.length))].append(r.score)
        means = {key: sum(s) / len(s) for key, s in configs.items()}
        columns: dict[str, list[float]] = defaultdict(list)
        for (table, _), m in means.items():
            columns[table].append(m)
        out = {table: round(sum(ms) / len(ms), 2) for table, ms in sorted(columns.items())}
        if means:
            out["overall"] = round(sum(means.values()) / len(means), 2)
        return out


def memory_text(wrapped: Iterable[str]) -> str:
    """The long-context agent's memory after appending each wrapped chunk:
    `memory = (memory + "\\n" + chunk).strip()`, built in one pass. The strip after each
    append leaves the first chunk stripped, every later one with its trailing whitespace
    cut, and a blank chunk nothing at all."""
    kept = [w for w in wrapped if w.strip()]
    return "\n".join(w.strip() if i == 0 else w.rstrip() for i, w in enumerate(kept))


def qa_pairs(record: dict) -> list[tuple[str, list[str]]]:
    """conversation_creator.py: several questions pair with their answers one to one; a
    single question takes the whole answer list."""
    questions = _as_list(record["questions"])
    answers = _as_list(record["answers"])
    if len(questions) > 1 and len(answers) > 1:
        return [(str(q), _flatten(a)) for q, a in zip(questions, answers)]
    return [(str(questions[0]) if questions else "", _flatten(answers))]


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value] if value else []


def _flatten(answer: Any) -> list[str]:
    """Gold answers of one question as strings (nested lists flattened, as the metric does)."""
    if isinstance(answer, list):
        return [str(x) for a in answer for x in _flatten(a)]
    return [str(answer)]


def _source(record: dict) -> str | None:
    meta = record.get("metadata")
    return (meta or {}).get("source") if isinstance(meta, dict) else record.get("source")


def _well_formed(row: data.SourceRow) -> bool:
    problem = data.row_problem(row.data, {"context": str, "questions": (list, str), "answers": (list, str)},
                               nonempty=("context", "questions", "answers"))
    if problem is None and len(row.data["context"]) <= MIN_CONTEXT_CHARS:
        problem = f"context has {len(row.data['context'])} characters; MemoryAgentBench needs > {MIN_CONTEXT_CHARS}"
    if problem:
        data.report(row, problem)
    return problem is None


def source_rows(root: Path, source: str) -> list[data.SourceRow]:
    """A folder holds <source>.jsonl; a single .jsonl / .json holds rows of any sources, told
    apart by metadata.source or a top-level `source` (`MemoryAgentBench.examples`)."""
    path = root / f"{source}.jsonl"
    if not path.is_file():
        raise data.BenchmarkDataError(f"bench={NAME}: {path} not found; {data.fix_hint(NAME, LOCAL)}")
    return data.read_rows(path)


def fetch(cfg: MemoryAgentBenchConfig, dest: Path) -> None:
    """Rows of every configuration from the hub splits, with the official chunks (nltk +
    tiktoken, needed here only) stored beside each context."""
    split, count = official_tools()
    by_source: dict[str, list[dict]] = defaultdict(list)
    for hub_split in sorted({t.split for t in TASKS.values()}):
        for row in data.hub_rows(cfg.hub_id, hub_split, revision="main"):
            source = _source(row)
            if source in TASKS and len(by_source[source]) < TASKS[source].max_contexts:
                chunks = pack_sentences(split(row["context"]), cfg.chunk_size, count)
                by_source[source].append({**row, CHUNKS_FIELD: {"chunk_size": cfg.chunk_size, "chunks": chunks}})
    missing = sorted(set(TASKS) - set(by_source))
    if missing:
        raise data.BenchmarkDataError(f"bench={NAME}: {cfg.hub_id} has no rows for {', '.join(missing)}")
    for source, rows in by_source.items():
        data.write_jsonl(dest / f"{source}.jsonl", rows)


def download(cfg: MemoryAgentBenchConfig) -> Path:
    return data.ensure_cached(NAME, cfg.cache_dir, lambda d: fetch(cfg, d), LOCAL)
