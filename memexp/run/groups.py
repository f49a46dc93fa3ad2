"""Which jobs of a sweep read their contexts together (shared reads).

Jobs join one group when they could run in one process on one loaded backbone and one pass over
each context: every field agrees except the method's answer and writer fields
(memexp.methods.read_identity), and none changes the loaded backbone (a read adapter). Inside a
group, jobs with equal read identities use one memory; the others take theirs from the same pass
(`Method.read_shared`). Each job keeps its own run folder, key, lock, records and summary
(memexp.run.runner.run_group), so a group changes where reading happens, never what is recorded.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from memexp.core.schema import ConfigError, RunConfig
from memexp.methods.read_identity import backbone_fields, pass_identity, read_identity


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def group_key(cfg: RunConfig) -> str:
    """Equal for jobs that may share one backbone and one pass per context (a job that sets a
    backbone field is never grouped: `shares_backbone`)."""
    fields = asdict(cfg)
    fields["method"] = pass_identity(cfg.method)
    return _canonical(fields)


def read_key(cfg: RunConfig) -> str:
    """Equal for jobs (of one group) whose reads give equal memories."""
    return _canonical(read_identity(cfg.method))


def shares_backbone(cfg: RunConfig) -> bool:
    """A job that sets a backbone field (a read adapter) prepares a backbone of its own: adapters are
    loaded onto the model itself, so two jobs' adapters cannot live on one copy."""
    defaults = type(cfg.method)()
    return all(getattr(cfg.method, f) == getattr(defaults, f) for f in backbone_fields(cfg.method.name))


def plan_groups(cfgs: Sequence[RunConfig]) -> list[list[int]]:
    """The jobs (indices into `cfgs`) of each group, groups in the order of their first job; a job
    with `share_reads=false`, or with its own backbone (`shares_backbone`), is a group of its own."""
    groups: dict[str, list[int]] = {}
    for i, cfg in enumerate(cfgs):
        key = group_key(cfg) if cfg.share_reads and shares_backbone(cfg) else f"alone:{i}"
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def memories_held(cfgs: Sequence[RunConfig]) -> int:
    """How many memories a group holds at once: one per distinct read identity (they share one
    state: the pass's), while every job answers from them one at a time."""
    return len({read_key(cfg) for cfg in cfgs})


def check_groups(cfgs: Sequence[RunConfig], groups: Sequence[Sequence[int]]) -> None:
    """ConfigError, before any model loads, for a group that would hold more memories at once than
    its jobs' `share_reads_max_memories` allows."""
    for members in groups:
        jobs = [cfgs[i] for i in members]
        held = memories_held(jobs)
        limit = min(cfg.share_reads_max_memories for cfg in jobs)
        if held > limit:
            numbers = ", ".join(f"#{i}" for i in members)
            raise ConfigError(f"share_reads_max_memories={limit}: jobs {numbers} share each context's read and "
                              f"would hold {held} memories (one archive each, beside one shared state) at once; "
                              f"raise share_reads_max_memories to {held} or run them apart with share_reads=false")


def describe_group(cfgs: Sequence[RunConfig], state_bytes: int | None) -> str:
    """One line for the log: what a group shares and holds."""
    held = memories_held(cfgs)
    state = f" of {state_bytes / 2**20:.2f} MiB (recurrent and conv)" if state_bytes is not None else ""
    return (f"{len(cfgs)} jobs share one read per context: {held} memor{'y' if held == 1 else 'ies'} "
            f"held at once on one state{state}")


PLAN = "shared_reads.json"  # in a sweep folder launched by groups (memexp.cli.sweeper): each group's jobs


def write_plan(sweep_dir: Path, plan: list[list[dict]]) -> None:
    """Each launched job's group: its jobs' number, overrides and composed configuration, its own first."""
    (Path(sweep_dir) / PLAN).write_text(json.dumps(plan, indent=1, default=str) + "\n")


def read_plan(sweep_dir: Path) -> list[list[dict]] | None:
    """The groups a sweep was launched by, launched job k running group k; None for a sweep whose jobs
    were launched one by one."""
    path = Path(sweep_dir) / PLAN
    return json.loads(path.read_text()) if path.is_file() else None
