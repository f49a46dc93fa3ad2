"""Run folders made the way the runner makes them (RunFolder, Record, summarize, record_costs),
with scores chosen by the test, so the report's numbers can be checked against known values."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from memexp.backbones.shapes import shapes_for
from memexp.benchmarks import build_benchmark
from memexp.core.compose import load_config
from memexp.core.types import Record
from memexp.costs.report import record_costs
from memexp.run.records import RunFolder, run_folder, summarize

BASE = ["backbone=tiny_gdn_random", "progress=false"]


def correct(task_index: int, length_index: int, n: int, salt: int) -> int:
    """How many of a cell's n questions score 100 (the rest score 0): distinct per cell and run."""
    return (3 * task_index + 2 * length_index + salt) % (n + 1)


class Made:
    """A run folder written by the factory and what the test knows about its scores."""

    def __init__(self, path: Path, cells: dict[tuple[str, str], tuple[int, int]]):
        self.path = path
        self.cells = cells  # (task, length) -> (correct, n)

    def by_length(self, length: str) -> tuple[float, int]:
        k = sum(c for (t, n_), (c, _) in self.cells.items() if n_ == length)
        n = sum(m for (t, n_), (_, m) in self.cells.items() if n_ == length)
        return 100.0 * k / n, n

    def overall(self) -> tuple[float, int]:
        k = sum(c for c, _ in self.cells.values())
        n = sum(m for _, m in self.cells.values())
        return 100.0 * k / n, n


def make_run(out: Path, overrides: list[str], lengths: list[str] | None = None, n: int = 4, salt: int = 0,
             complete: bool = True, shard: str | None = None, keep=None, replay: int | None = None) -> Made:
    """One run folder under `out` (the runner's output_dir), as `python -m memexp run` writes it.
    `lengths` overrides the lengths recorded (LongBench's buckets); `keep(task, length, i)` drops questions
    (a shard's subset); `shard` marks the folder as bench.shard=i/n; `replay`: NoteBank's replayed
    tokens per question (default R x B, the bound)."""
    cfg = load_config(BASE + overrides + [f"output_dir={out}"])
    cfg_dict = asdict(cfg)
    path = run_folder(cfg)
    if shard is not None:
        cfg_dict["bench"]["shard"] = shard
        path = path.with_name(path.name + "_" + shard.replace("/", "of"))
    folder = RunFolder(path)
    folder.prepare(cfg_dict)
    shapes = shapes_for(cfg.backbone)
    lengths = lengths or [str(x) for x in cfg.bench.lengths]
    records, cells = [], {}
    for ti, task in enumerate(cfg.bench.tasks):
        for li, length in enumerate(lengths):
            k = correct(ti, li, n, salt)
            kept = hits = 0
            for i in range(n):
                if keep is not None and not keep(task, length, i):
                    continue
                context = int(length) - 40 if length.isdigit() else 300 + 100 * li
                tokens = {"context": context, "question": 12, "generated": 4}
                if cfg.method.name == "notebank":
                    tokens["replay"] = cfg.method.replay_budget * cfg.method.span_budget if replay is None else replay
                rec = Record(example_id=f"{task}/{length}/{i}", question_id="0", task=task, length=length,
                             score=100.0 if i < k else 0.0, metric="string_match", tokens=tokens,
                             costs=record_costs(shapes, cfg.method, tokens))
                folder.append(rec)
                records.append(rec)
                kept += 1
                hits += i < k
            cells[(task, length)] = (hits, kept)
    summary = summarize(records)
    summary["num_examples"] = len(records)
    summary["complete"] = complete
    if shard is not None:
        summary["shard"] = shard
    for key, value in build_benchmark(cfg.bench).aggregate(records).items():
        summary[f"aggregate/{key}"] = value
    folder.write_summary(summary)
    return Made(path, cells)
