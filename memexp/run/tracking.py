"""Weights & Biases sink. Local records are always written first; W&B never fails a run.

`logger=wandb` goes online when credentials exist, offline otherwise (`logger.mode=auto`);
any error talking to W&B is reported once and the run continues with local records only.

What a run shows (the names the dashboard, memexp.report.dashboard, builds its panels on):
- name `<bench> | <backbone> | <method>` plus the fields that differ (a sweep's swept fields, a
  single run's command-line fields); group = the sweep; tags backbone:/method:/bench: and the fields;
- history, one row per context length, x-axis `length` (`define_metric`): `<bench>/<task>/score`,
  `<bench>/mean/score`, `<bench>/added_flops_ratio`; logged once, by the process that completes
  the run, so a resumed run has no repeated points;
- a process that adds no record to a run whose last logged state (`wandb_state.json` in the run
  folder: records, complete, last step) is unchanged starts no W&B run at all; one that resumes
  logs at the steps after the last one logged, so the offline runs of one run folder
  (`<run folder>/wandb/offline-run-<time>-<id>/`, one per process) synced in time order
  (`wandb sync <run folder>/wandb/offline-run-*`) continue one history;
- summary: `<bench>/<task>/<length>/score` and `/n` for every cell, `<bench>/<task>/score`,
  `<bench>/mean/<length>/score`, `<bench>/overall/score`, costs, `memexp/complete`;
- table `<bench>/records`: every question of the run, rebuilt from records.jsonl at finish (so it
  is complete after any number of resumes), with the question, prediction, references, score,
  tokens, the replayed notes' text and per-stage seconds;
- artifact `<bench>-<run folder name>` (type `memexp-run`): records.jsonl, summary.json and the
  resolved config.yaml;
- a run that is not complete (stopped by `max_examples`, interrupted) carries the tag `incomplete`,
  `memexp/complete = false` and the artifact alias `incomplete`.
"""

from __future__ import annotations

import json
import netrc
import os
import secrets
import string
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

from memexp.core.atomic import atomic_write
from memexp.core.schema import LoggerConfig
from memexp.core.types import Record
from memexp.run.records import RunFolder

INCOMPLETE = "incomplete"
# Fields that say how a run is watched or scheduled, never what it computes: not in names or tags.
_NOT_LABELS = ("logger", "progress", "threads", "output_dir", "kernels", "max_examples", "hydra")


def has_wandb_credentials() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        auth = netrc.netrc().authenticators("api.wandb.ai")
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False
    return auth is not None


def resolve_mode(cfg: LoggerConfig) -> str:
    if os.environ.get("WANDB_MODE") in ("offline", "disabled", "dryrun"):
        return "offline" if os.environ["WANDB_MODE"] == "dryrun" else os.environ["WANDB_MODE"]
    if cfg.mode != "auto":
        return cfg.mode
    return "online" if has_wandb_credentials() else "offline"


def _split(override: str) -> tuple[str, str]:
    key, _, value = override.partition("=")
    return key.lstrip("+~"), value


def swept_keys(jobs: list[list[str]]) -> set[str]:
    """The override keys whose values differ between the jobs of a sweep (Hydra's job lists)."""
    values: dict[str, set[str]] = {}
    present: dict[str, int] = {}
    for job in jobs:
        for key, value in map(_split, job):
            values.setdefault(key, set()).add(value)
            present[key] = present.get(key, 0) + 1
    return {k for k, v in values.items() if len(v) > 1 or present[k] < len(jobs)}


def label_overrides(job_overrides: Iterable[str], swept: set[str] | None = None) -> list[str]:
    """The `field=value` overrides that tell this run apart: in a sweep (`swept` given) the swept
    fields, else every field set on the command line; group choices (method=...) are in the name
    already and watching/scheduling fields never are."""
    out = []
    for key, value in map(_split, job_overrides):
        if "." not in key or key.split(".")[0] in _NOT_LABELS:
            continue
        if swept is None or key in swept:
            out.append(f"{key.split('.', 1)[1]}={value}")
    return out


def run_name(config: dict, labels: list[str]) -> str:
    parts = [config.get(axis, {}).get("name", "?") for axis in ("bench", "backbone", "method")]
    return " | ".join([*parts, *([" ".join(labels)] if labels else [])])


def run_tags(config: dict, labels: list[str], extra: Iterable[str] = ()) -> list[str]:
    axes = [f"{axis}:{config[axis]['name']}" for axis in ("backbone", "method", "bench") if axis in config]
    return list(dict.fromkeys([*axes, *labels, *extra]))


class NullSink:
    def log_record(self, record: Record) -> None:
        pass

    def finish(self, summary: dict) -> None:
        pass


STATE_FILE = "wandb_state.json"


@dataclass
class LoggedState:
    """What the W&B run of a run folder holds so far, kept beside the records."""

    records: int = -1  # questions in the run at the last finish (-1: never finished)
    complete: bool = False
    step: int = -1  # the last history step logged

    @classmethod
    def read(cls, folder: RunFolder) -> LoggedState:
        try:
            return cls(**json.loads(folder.read_text(STATE_FILE) or "{}"))
        except (TypeError, ValueError):  # unreadable: log as if nothing were logged yet
            return cls()

    def write(self, folder: RunFolder) -> None:
        atomic_write(folder.path / STATE_FILE, json.dumps(asdict(self)))


class WandbSink:
    """One W&B run per run folder (resumed by id); see the module docstring for what it logs.
    The W&B run starts with the first thing to log, so a process with nothing new starts none."""

    def __init__(self, cfg: LoggerConfig, run_dir: Path, config: dict, group: str | None = None,
                 run_id: str | None = None, labels: list[str] | None = None,
                 expected_examples: int | None = None, concurrent: bool = False) -> None:
        self.run = None
        # one W&B run per job even when several jobs of one process log at once (a shared-read
        # group); alone, a run left open by an earlier job of this process is finished first
        self.reinit = "create_new" if concurrent else "finish_previous"
        self.failed = False
        self.cfg, self.config, self.group, self.labels = cfg, config, group, labels or []
        self.folder = RunFolder(run_dir)
        self.bench = config["bench"]["name"]
        self.expected_examples = expected_examples
        self.tags = run_tags(config, self.labels, cfg.tags)
        self.state = LoggedState.read(self.folder)
        self.logged = len(self.folder.load_records())  # questions already recorded by earlier processes
        self.added = 0
        self.id = run_id
        try:
            import wandb

            self._wandb = wandb
            # chosen here, not by wandb.init, so that it is known before (and without) a W&B run
            self.id = run_id or "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))
        except Exception as e:
            self._unavailable(e)

    def _unavailable(self, e: Exception) -> None:
        """Any W&B failure leaves the local records as the result."""
        print(f"[memexp] W&B unavailable ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
              "continuing with local records only", file=sys.stderr)
        self.failed = True

    def _start(self) -> bool:
        if self.run is None and not self.failed:
            try:
                self.run = self._wandb.init(
                    project=self.cfg.project, entity=self.cfg.entity, group=self.cfg.group or self.group,
                    name=run_name(self.config, self.labels), tags=self.tags,
                    config={**self.config, "run_folder": str(self.folder.path)}, dir=str(self.folder.path),
                    mode=resolve_mode(self.cfg), job_type="eval", id=self.id, resume="allow",
                    reinit=self.reinit, settings=self._wandb.Settings(init_timeout=30, silent=True),
                )
                self.run.define_metric("progress/questions")
                self.run.define_metric("progress/*", step_metric="progress/questions")
            except Exception as e:
                self._unavailable(e)
                self.run = None
        return self.run is not None

    def _log(self, row: dict) -> None:
        """One history row at the step after the last one this run folder's W&B run logged (an
        offline process otherwise starts again at 0)."""
        self.state.step += 1
        self.run.log(row, step=self.state.step)
        self.state.write(self.folder)

    @property
    def run_id(self) -> str | None:
        return None if self.failed else self.id

    def log_record(self, record: Record) -> None:
        """Live progress while the run goes: questions answered so far (across resumes) and each score."""
        self.logged += 1
        self.added += 1
        if not self._start():
            return
        try:
            self._log({"progress/questions": self.logged, "progress/score": record.score})
        except Exception:
            pass

    def finish(self, summary: dict) -> None:
        records = self.folder.records()
        complete = self.is_complete(summary)
        if not self.added and (self.state.records, self.state.complete) == (len(records), complete):
            return  # nothing new since the last finish logged this very state
        if not self._start():
            return
        try:
            if complete:
                self._log_lengths(summary, records)
            columns, rows = records_table(records)
            self._log({f"{self.bench}/records": self._wandb.Table(columns=columns, data=rows)})
            # after the rows: a row given an explicit step is committed with the next one, and would
            # set the summary's same-named keys (a task's score) to its length's value
            self.run.summary.update({**summary_metrics(self.bench, summary), "memexp/complete": complete})
            self.run.tags = tuple(t for t in self.tags if t != INCOMPLETE) + (() if complete else (INCOMPLETE,))
            self._log_artifact(complete)
            self.run.finish()
            self.state.records, self.state.complete = len(records), complete
            self.state.write(self.folder)
        except Exception as e:
            print(f"[memexp] W&B logging failed at finish ({type(e).__name__}: {e}); local records are complete",
                  file=sys.stderr)

    def is_complete(self, summary: dict) -> bool:
        """Every question recorded and, where the benchmark's size is known, every example."""
        if not summary.get("complete", True):
            return False
        seen = summary.get("num_examples")
        return self.expected_examples is None or seen is None or seen >= self.expected_examples

    def _log_lengths(self, summary: dict, records: list[Record]) -> None:
        rows = length_rows(self.bench, summary, records)
        self.run.define_metric("length")
        for key in sorted({k for row in rows for k in row if k != "length"}):
            self.run.define_metric(key, step_metric="length")
        for row in rows:
            self._log(row)

    def _log_artifact(self, complete: bool) -> None:
        artifact = self._wandb.Artifact(f"{self.bench}-{self.folder.path.name}", type="memexp-run",
                                        metadata={"complete": complete, "run_folder": str(self.folder.path)})
        for name in ("records.jsonl", "summary.json", "config.yaml"):
            if (self.folder.path / name).exists():
                artifact.add_file(str(self.folder.path / name), name=name)
        self.run.log_artifact(artifact, aliases=["latest", "complete" if complete else INCOMPLETE])


def _numeric(length: str) -> int | None:
    return int(length) if str(length).isdigit() else None


def length_rows(bench: str, summary: dict, records: list[Record]) -> list[dict[str, Any]]:
    """One history row per numeric context length (a label such as LongBench's "0-4k" has no axis
    position; its scores are in the summary)."""
    flops: dict[str, list[float]] = {}
    for r in records:
        c = r.costs or {}
        if c.get("added_flops") is not None and c.get("plain_flops"):
            acc = flops.setdefault(str(r.length), [0.0, 0.0])
            acc[0] += c["added_flops"]
            acc[1] += c["plain_flops"]
    rows = []
    for length, mean in (summary.get("by_length") or {}).items():
        n = _numeric(length)
        if n is None:
            continue
        row: dict[str, Any] = {"length": n, f"{bench}/mean/score": mean}
        for task, cells in (summary.get("scores") or {}).items():
            if length in cells:
                row[f"{bench}/{task}/score"] = cells[length]
        if length in flops:
            row[f"{bench}/added_flops_ratio"] = 100.0 * flops[length][0] / flops[length][1]
        rows.append(row)
    return sorted(rows, key=lambda r: r["length"])


def summary_metrics(bench: str, summary: dict) -> dict[str, Any]:
    """Every task x length cell (score and n), per-task, per-length and overall means, costs."""
    out: dict[str, Any] = {}
    counts = summary.get("counts") or {}
    for task, row in (summary.get("scores") or {}).items():
        for length, value in row.items():
            out[f"{bench}/{task}/{length}/score"] = value
            if length in counts.get(task, {}):
                out[f"{bench}/{task}/{length}/n"] = counts[task][length]
    for task, value in (summary.get("by_task") or {}).items():
        out[f"{bench}/{task}/score"] = value
    for length, value in (summary.get("by_length") or {}).items():
        out[f"{bench}/mean/{length}/score"] = value
    if summary.get("overall") is not None:
        out[f"{bench}/overall/score"] = summary["overall"]
    for key in ("num_questions", "num_examples"):
        if key in summary:
            out[f"{bench}/{key}"] = summary[key]
    for key, value in summary.items():
        if key.startswith(("mean_", "aggregate/")) or key == "added_flops_ratio":
            out[f"{bench}/{key}"] = value
    return out


def _replayed(record: Record) -> str:
    """The replayed notes' text: methods that replay put it in `method_stats["selected"][i]["text"]`."""
    selected = record.method_stats.get("selected") or []
    return "\n---\n".join(str(e["text"]) for e in selected if isinstance(e, dict) and "text" in e)


def records_table(records: list[Record]) -> tuple[list[str], list[list[Any]]]:
    """(columns, rows) of the per-question table; token kinds and stages are the union over records."""
    kinds = list(dict.fromkeys(k for r in records for k in r.tokens))
    stages = list(dict.fromkeys(k for r in records for k in r.seconds))
    columns = ["example_id", "question_id", "task", "length", "question", "prediction", "references", "score",
               "metric", *(f"tokens/{k}" for k in kinds), "replayed_notes", *(f"seconds/{s}" for s in stages),
               "method_stats"]
    rows = [[r.example_id, r.question_id, r.task, str(r.length), r.question or "", r.prediction,
             " | ".join(map(str, r.references)), r.score, r.metric, *(r.tokens.get(k) for k in kinds),
             _replayed(r), *(r.seconds.get(s) for s in stages), json.dumps(r.method_stats, default=str)]
            for r in records]
    return columns, rows


def make_sink(cfg: LoggerConfig, run_dir: Path, config: dict, group: str | None = None, run_id: str | None = None,
              labels: list[str] | None = None, expected_examples: int | None = None, concurrent: bool = False):
    """`concurrent`: other sinks of this process log at the same time (the jobs of a shared-read
    group), each to its own W&B run."""
    if cfg.name == "none":
        return NullSink()
    return WandbSink(cfg, run_dir, config, group, run_id, labels, expected_examples, concurrent)
