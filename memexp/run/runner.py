"""The single runner: backbone x method x bench, resumable, one record per question.

For each example not yet fully recorded: the method reads the context once, every question
answers from a copy of the retained state, each answer is scored and appended to
records.jsonl before the next begins.
"""

from __future__ import annotations

import itertools
import sys
import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from types import SimpleNamespace
from typing import Any, Iterator

import torch
from tqdm import tqdm

from memexp.backbones.base import InputFeed
from memexp.benchmarks import build_benchmark
from memexp.benchmarks.base import Benchmark
from memexp.benchmarks.skipped_rows import SkippedRows, collecting
from memexp.core import interrupts
from memexp.core.errors import RunInterrupted
from memexp.core.schema import RunConfig
from memexp.core.types import READ_SHARED_BY, Example, Question, Record
from memexp.methods.base import Answer, Memory, Method
from memexp.run import shards
from memexp.run.excerpts import context_excerpts
from memexp.run.groups import describe_group, read_key
from memexp.run.identity import run_key, write_provenance
from memexp.run.lock import RunLock
from memexp.run.records import RecordsCorruptError, RunFolder, folder_path, format_table, summarize
from memexp.run.tracking import make_sink


def run(cfg: RunConfig, sweep_group: str | None = None, labels: list[str] | None = None) -> dict:
    """Run (or resume) one configuration; returns the summary. `labels`: the `field=value`s that
    tell this run apart in the logger (memexp.run.tracking.label_overrides).

    The folder is named by the run's identity (memexp.run.identity) and held by one process at a
    time (memexp.run.lock); Ctrl-C ends in RunInterrupted, which says what was recorded."""
    return run_group([cfg], sweep_group, [labels])[0]


def run_group(cfgs: list[RunConfig], sweep_group: str | None = None,
              labels: list[list[str] | None] | None = None) -> list[dict]:
    """Run (or resume) configurations of one shared-read group (memexp.run.groups) in this process:
    one backbone, one benchmark, each context read once for every job that still needs it, each
    job answered and recorded in its own run folder exactly as `run` alone would. Returns each
    job's summary, in order."""
    from memexp.kernels.dispatch import set_kernels
    from memexp.run.checks import check_run

    labels = labels or [None] * len(cfgs)
    for cfg in cfgs:
        check_run(cfg)
    first = cfgs[0]
    if first.threads:
        torch.set_num_threads(first.threads)
    set_kernels(first.kernels)
    keyed = [run_key(cfg, fetch=True) for cfg in cfgs]
    folders = [RunFolder(folder_path(cfg, key)) for cfg, (key, _) in zip(cfgs, keyed)]
    for cfg, folder in zip(cfgs, folders):
        check_not_locked(folder.path, cfg.wait_for_lock)  # before loading a model only to find a folder taken
    # whatever can still refuse the run (a checkpoint that does not load, a method that does not fit
    # the backbone) refuses it before its folder exists: a failed start leaves no empty run folder
    backbone, methods, bench = _build(cfgs)
    # from here Ctrl-C stops the run cleanly (partial summary, how to resume), whatever it interrupts
    with interrupts.raising():
        try:
            with ExitStack() as held:
                for cfg, folder in zip(cfgs, folders):
                    folder.path.mkdir(parents=True, exist_ok=True)
                    held.enter_context(RunLock(folder.path, wait=cfg.wait_for_lock))
                skipped = held.enter_context(collecting(first.strict_data))
                for cfg, folder, (_, ident) in zip(cfgs, folders, keyed):
                    folder.prepare(asdict(cfg))
                    write_provenance(folder.path, ident)
                jobs = [Job(cfg, folder, method, read_key(cfg), label) for cfg, folder, method, label in
                        zip(cfgs, folders, methods, labels)]
                return _run_in(jobs, backbone, bench, sweep_group, skipped)
        except BaseException as e:
            if not (isinstance(e, KeyboardInterrupt) or interrupts.requested()):
                raise
            folder = folders[0]
            recorded = folder.records_path.read_bytes().count(b"\n") if folder.records_path.exists() else 0
            raise RunInterrupted(folder.path, recorded) from None


def check_not_locked(path, wait: bool) -> None:
    """RunLockedError now when another process holds an existing run folder (and `wait` is off)."""
    if not wait and path.is_dir():
        with RunLock(path):
            pass


def _build(cfgs: list[RunConfig]) -> tuple:
    """The group's backbone (loaded once), each job's method (prepared on it) and the benchmark."""
    from memexp.backbones import load_backbone
    from memexp.methods import build_method

    first = cfgs[0]
    backbone = load_backbone(first.backbone)
    methods = [build_method(cfg.method) for cfg in cfgs]
    for method in methods:
        method.prepare(backbone)
    bench = build_benchmark(first.bench)
    bench.size_with(InputFeed(backbone, first.backbone.chat))
    return backbone, methods, bench


@dataclass
class Job:
    """One configuration of a run group, with its folder, method and what it recorded so far."""

    cfg: RunConfig
    folder: RunFolder
    method: Method
    read_key: str  # equal for the jobs whose reads give equal memories (memexp.run.groups.read_key)
    labels: list[str] | None = None
    done_keys: set = field(default_factory=set)
    records: list[Record] = field(default_factory=list)
    recorded_before: int = 0  # records on disk when this process started
    costs: Any = None
    sink: Any = None

    def needs(self, ex: Example) -> bool:
        return not all((ex.id, q.id) in self.done_keys for q in ex.questions)


def _run_in(jobs: list[Job], backbone, bench: Benchmark, sweep_group: str | None, skipped: SkippedRows) -> list[dict]:
    """The run itself, every job's folder prepared and locked."""
    cfg = jobs[0].cfg  # the fields below agree across a group (memexp.run.groups.group_key)
    for job in jobs:
        done = job.folder.records(repair=job.cfg.records_repair)
        job.done_keys, job.records, job.recorded_before = {r.key for r in done}, list(done), len(done)
        print(f"[memexp] run folder: {job.folder.path} ({len(done)} questions already recorded)", file=sys.stderr)
    if len(jobs) > 1:
        print(f"[memexp] {describe_group([j.cfg for j in jobs], _state_bytes(backbone, cfg))}", file=sys.stderr)

    examples = bench.examples(backbone.tokenizer)
    total = bench.num_examples()
    if total is None:
        examples = list(examples)
        total = len(examples)
    shard = cfg.bench.shard
    examples, total = shards.select(examples, total, shard)
    expected = total  # every example of the configured benchmark (shard): what `complete` asks for
    for job in jobs:
        job.folder.write_text("expected_examples.txt", f"{expected}\n")  # for `memexp status` while the run goes on
    if cfg.max_examples is not None:
        examples, total = itertools.islice(examples, cfg.max_examples), min(total, cfg.max_examples)
    for job in jobs:
        job.costs = record_costs_fn(job.cfg, backbone)
        job.sink = make_sink(job.cfg.logger, job.folder.path, asdict(job.cfg), group=sweep_group,
                             run_id=job.folder.read_text("wandb_id.txt"), labels=job.labels,
                             expected_examples=expected, concurrent=len(jobs) > 1)
        if getattr(job.sink, "run_id", None):
            job.folder.write_text("wandb_id.txt", job.sink.run_id)
    seen = {"examples": 0, "questions": 0, "expected": expected, "skipped": skipped, "shard": shard}
    try:
        bar = tqdm(total=total, unit="ex", disable=not cfg.progress, dynamic_ncols=True, file=sys.stderr)
        for ex in examples:
            seen["examples"] += 1
            seen["questions"] += len(ex.questions)
            pending = [job for job in jobs if job.needs(ex)]
            if not pending:  # every job recorded it: not even tokenized
                bar.update(1)
                continue
            for job, rec in answer_jobs(ex, backbone, bench, pending, cfg.backbone.chat):
                job.folder.append(rec)
                job.records.append(rec)
                job.sink.log_record(rec)
            bar.update(1)
            scored = [r.score for job in jobs for r in job.records]
            if scored:
                bar.set_postfix(score=f"{sum(scored) / len(scored):.1f}")
        bar.close()
        summaries = []
        for job in jobs:
            summary = _summary(job.records, bench, seen)
            # a smoke run over a finished folder that recorded nothing new keeps the whole run's summary
            kept = _complete_summary(job.folder, job.recorded_before) \
                if cfg.max_examples is not None and len(job.records) == job.recorded_before else None
            if kept is not None:
                summary = kept
            else:
                job.folder.write_summary(summary)
            job.sink.finish(summary)
            summaries.append(summary)
    except BaseException:
        for job in jobs:
            if job.sink is not None:
                _summary_on_failure(job.folder, job.records, bench, seen, job.sink)
        raise
    for job, summary in zip(jobs, summaries):
        title = f"{job.cfg.bench.name} | {job.cfg.backbone.name} | {job.cfg.method.name}  ->  {job.folder.path}"
        print(format_table(summary, title))
    return summaries


def _state_bytes(backbone, cfg: RunConfig) -> int | None:
    """The recurrent and conv state a read retains (KV caches, which grow with the context, aside),
    from the loaded backbone's shapes; None when they cannot be counted."""
    from memexp.backbones.shapes import loaded_shapes

    try:
        shapes = loaded_shapes(backbone, cfg.backbone)
    except Exception:  # accounting must never cost a run
        return None
    return shapes.recurrent_bytes + shapes.conv_bytes


def _complete_summary(folder: RunFolder, recorded: int) -> dict | None:
    """The folder's summary.json when it describes a complete run of exactly the `recorded`
    questions on disk; None otherwise (none yet, unreadable, partial or stale)."""
    import json

    try:
        summary = json.loads(folder.summary_path.read_text())
    except (OSError, ValueError):
        return None
    if isinstance(summary, dict) and summary.get("complete") is True and summary.get("num_questions") == recorded:
        return summary
    return None


def _summary_on_failure(folder: RunFolder, records: list[Record], bench: Benchmark, seen: dict, sink) -> None:
    """The partial summary (complete: false) of a run that stops, also to the logger, which marks
    the run incomplete; best effort, since the failure may be the disk itself, and the error that
    stopped the run is the one to report. It describes the records on disk: Ctrl-C can land
    between a record's write and its `records.append`, and the file is what a resume reads."""
    try:
        records = folder.records(repair=False)
    except (OSError, RecordsCorruptError):
        pass  # the in-memory records, which the file may lack only by a write the failure took back
    if not records:
        return
    partial = _summary(records, bench, seen)
    try:
        folder.write_summary(partial)
    except OSError:
        pass
    sink.finish({**partial, "complete": False})


def _chat_applies(ex: Example, chat: bool) -> bool:
    """`Question.chat_template`: the context is shared, so the first question decides."""
    return chat and bool(ex.questions) and ex.questions[0].chat_template


def answer_stop_ids(tok, q: Question) -> list[int] | None:
    """The ids that end `q`'s answer: the tokenizer's stop ids plus the last token of each of
    `q.stop`'s strings (LongBench's pred.py: `tokenizer.encode("\\n")[-1]`); None when the
    question adds none, which leaves the tokenizer's own."""
    if not q.stop:
        return None
    extra = [ids[-1] for ids in map(tok.encode, q.stop) if ids]
    return list(dict.fromkeys([*tok.stop_ids, *extra]))


def run_example(ex: Example, backbone, method, bench: Benchmark, done_keys: frozenset | set = frozenset(),
                costs=None, chat: bool = False) -> Iterator[Record]:
    """Read the example's context once, answer each question not in `done_keys` from the
    retained memory, and yield one scored record per question."""
    job = SimpleNamespace(method=method, done_keys=done_keys, costs=costs, read_key="")
    for _, rec in answer_jobs(ex, backbone, bench, [job], chat):
        yield rec


def answer_jobs(ex: Example, backbone, bench: Benchmark, jobs: list, chat: bool = False) -> Iterator[tuple]:
    """Read the example's context once for `jobs` (each with `.method`, `.read_key`, `.done_keys`,
    `.costs`; in one group, memexp.run.groups) and yield (job, record) for each question a job has
    not recorded.

    Jobs whose reads are equal (memexp.methods.read_identity) answer from one memory; the others of
    a pass take theirs from one `Method.read_shared`. Each job's record is the one its own run
    would write: its `seconds.read` is the pass's wall time and `seconds.read_shared_by` (when more than
    one) how many jobs that time served."""
    tok = backbone.tokenizer
    stop_ids = set(tok.stop_ids)
    feed = InputFeed(backbone, _chat_applies(ex, chat))
    context_ids = feed.context_ids(ex.context, ex.system, ex.bos)
    readers: dict[str, Any] = {}  # read key -> the first job's method with that read
    for job in jobs:
        readers.setdefault(job.read_key, job.method)
    t0 = time.perf_counter()
    methods = list(readers.values())
    memories = dict(zip(readers, type(methods[0]).read_shared(backbone, context_ids, methods))) if methods else {}
    read_seconds = time.perf_counter() - t0
    for job in jobs:
        memory = memories[job.read_key]
        for q in ex.questions:
            if (ex.id, q.id) in job.done_keys:
                continue
            q_ids = feed.question_ids(ex.context, q.user_prompt, q.answer_prefix, ex.system)
            stop = answer_stop_ids(tok, q)
            ans = job.method.answer(backbone, memory, q_ids, q, stop)
            ended = stop_ids if stop is None else set(stop)
            gen = ans.ids[:-1] if ans.ids and ans.ids[-1] in ended else ans.ids  # the id that ended it
            prediction = bench.postprocess(tok.decode(gen), q)
            score = float(bench.score(prediction, q))
            rec = answer_record(ex, q, prediction, score, len(context_ids), read_seconds, memory, ans)
            if len(jobs) > 1:
                rec.seconds[READ_SHARED_BY] = len(jobs)
            if job.costs is not None:
                rec.costs = job.costs(rec.tokens, memory.stats)
            yield job, rec


def answer_record(ex: Example, q: Question, prediction: str, score: float, context_tokens: int,
                  read_seconds: float, memory: Memory, answer: Answer) -> Record:
    """The record of `q` answered from `memory`, which read `ex`'s context in `read_seconds`
    (built here, not in records.py, so that records depend on no benchmark or method type)."""
    return Record(
        example_id=ex.id, question_id=q.id, task=ex.task, length=ex.length, question=q.prompt, prediction=prediction,
        references=q.references, score=score, metric=q.metric, tokens={"context": context_tokens, **answer.tokens},
        seconds={"read": read_seconds, **{f"read/{k}": v for k, v in memory.seconds.items()}, **answer.seconds},
        method_stats={**memory.stats, **answer.stats}, source=ex.source,
        context_excerpts=context_excerpts(ex.context, q.references) or None,
    )


def _summary(records: list[Record], bench: Benchmark, seen: dict) -> dict:
    """`seen`: examples and questions the benchmark yielded so far (all of them at the end), the
    examples the configured benchmark has, and the rows its loader skipped."""
    summary = summarize(records)
    summary["num_examples"] = seen["examples"]
    summary["expected_examples"] = seen["expected"]
    summary["complete"] = seen["examples"] == seen["expected"] and summary["num_questions"] == seen["questions"]
    summary["skipped_rows"] = seen["skipped"].summary()
    skipped = bench.skipped()  # left out by the benchmark's fit rule: listed, never scored
    if skipped:
        summary["num_skipped"], summary["skipped"] = len(skipped), skipped
    for key, value in bench.aggregate(records).items():
        summary[f"aggregate/{key}"] = value
    summary.update(shards.summary_fields(seen["shard"], seen["expected"]))
    return summary


def record_costs_fn(cfg: RunConfig, backbone):
    """Per-record analytical costs (memexp.costs.report) from the loaded backbone's own shapes; each
    record stores {"error": ...} instead when they cannot be computed."""
    from memexp.backbones.shapes import loaded_shapes
    from memexp.costs.report import record_costs

    try:
        shapes = loaded_shapes(backbone, cfg.backbone)
    except Exception as e:  # accounting must never cost a result
        error = f"{type(e).__name__}: {e}"
        return lambda tokens, stats: {"error": error}

    def fn(tokens: dict, stats: dict):
        try:
            return record_costs(shapes, cfg.method, tokens, stats)
        except Exception as e:  # accounting must never cost a result
            return {"error": f"{type(e).__name__}: {e}"}

    return fn
