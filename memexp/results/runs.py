"""Run folders as the report sees them: found under run roots or through sweep folders,
read without touching them, shards of one configuration merged into one run."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from memexp.results.labels import config_key
from memexp.results.reading import UnreadableRunError, read_records, read_summary
from memexp.run.shards import ShardMergeError, merge_shards

# The pointer a sweep job folder (multirun/<date>/<time>/<job>/) holds to its run folder.
POINTER = "run_folder.txt"


@dataclass(frozen=True)
class Cell:
    """One table cell: a mean score in [0, 100] over n questions (n None: not recorded)."""

    score: float | None
    n: int | None = None


@dataclass
class Run:
    path: Path
    config: dict
    summary: dict
    parts: list[Path] = field(default_factory=list)  # the shard folders merged into this run
    _records: list[dict] | None = None

    @property
    def bench(self) -> str:
        return str((self.config.get("bench") or {}).get("name", "bench"))

    @property
    def backbone(self) -> str:
        return str((self.config.get("backbone") or {}).get("name", "?"))

    @property
    def method(self) -> dict:
        return self.config.get("method") or {}

    @property
    def complete(self) -> bool:
        """False only when the summary says so (summaries written before `complete` existed count as complete)."""
        return self.summary.get("complete", True) is not False

    @property
    def records(self) -> list[dict]:
        if self._records is None:
            self._records = [r for p in (self.parts or [self.path]) for r in read_records(p)]
        return self._records

    @property
    def task_set(self) -> tuple[str, ...]:
        """The tasks the run is configured for (bench.tasks), else those it recorded: runs of
        different task sets are never averaged in one table."""
        tasks = (self.config.get("bench") or {}).get("tasks") or self.tasks() or {r.get("task") for r in self.records}
        return tuple(sorted(map(str, tasks)))

    def lengths(self) -> list[str]:
        return list(self.summary.get("by_length") or {})

    def tasks(self) -> list[str]:
        return list(self.summary.get("scores") or {})

    def by_length(self, task: str | None = None) -> dict[str, Cell]:
        """Score per length for one task, or the mean over tasks (question-weighted, as summarize)."""
        counts = self.summary.get("counts") or {}
        if task is not None:
            row = (self.summary.get("scores") or {}).get(task, {})
            return {n: Cell(s, (counts.get(task) or {}).get(n)) for n, s in row.items()}
        return {n: Cell(s, _sum_or_none(c.get(n) for c in counts.values()) if counts else None)
                for n, s in (self.summary.get("by_length") or {}).items()}

    def by_task(self) -> dict[str, Cell]:
        counts = self.summary.get("counts") or {}
        return {t: Cell(s, _sum_or_none((counts.get(t) or {}).values()) if counts else None)
                for t, s in (self.summary.get("by_task") or {}).items()}

    def overall(self) -> Cell:
        return Cell(self.summary.get("overall"), self.summary.get("num_questions"))

    def aggregates(self) -> dict[str, float]:
        """The benchmark's own aggregates (LongBench categories ...), as the runner writes them."""
        return {k.split("/", 1)[1]: v for k, v in self.summary.items() if k.startswith("aggregate/")}


def _sum_or_none(values) -> int | None:
    values = list(values)
    return None if not values or any(v is None for v in values) else int(sum(values))


def _is_run_folder(folder: Path) -> bool:
    """config.yaml beside a summary.json, or beside the records of a run stopped before its first summary."""
    return (folder / "config.yaml").is_file() and ((folder / "summary.json").is_file()
                                                  or _nonempty(folder / "records.jsonl"))


def _nonempty(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 0


def _run_folders(root: Path) -> list[Path]:
    """Run folders under `root` (see `_is_run_folder`), and those that sweep job folders point to."""
    found = sorted({p.parent for name in ("summary.json", "records.jsonl") for p in root.rglob(name)
                    if _is_run_folder(p.parent)})
    if root.is_dir() and _is_run_folder(root):
        found.insert(0, root)
    for pointer in sorted(root.rglob(POINTER)):
        target = _follow(pointer)
        if target is None:
            print(f"[memexp report] {pointer}: points to no run folder with a summary.json", file=sys.stderr)
        else:
            found.append(target)
    return found


def _follow(pointer: Path) -> Path | None:
    text = pointer.read_text().strip()
    if not text:
        return None
    p = Path(text).expanduser()
    # relative pointers: to the job folder, or to the folder the sweep was launched from
    for cand in ([p] if p.is_absolute() else [pointer.parent / p, Path.cwd() / p]):
        if _is_run_folder(cand):
            return cand
    return None


def find_runs(roots: list[Path], unreadable: list[str] | None = None) -> list[Run]:
    """Every run under `roots` (run folders, or sweep folders with pointers), each once; shards
    of one configuration (configs equal but for bench.shard) merged into one run. A folder whose
    config, summary or records cannot be read is left out with one line on stderr, also appended
    to `unreadable`: the rest of the report is still made."""
    seen: dict[Path, None] = {}
    for root in roots:
        for folder in _run_folders(Path(root)):
            seen.setdefault(folder.resolve(), None)
    runs = []
    for f in seen:
        try:
            runs.append(_read_run(f))
        except UnreadableRunError as e:
            print(f"memexp: report: {e}; left out of the report", file=sys.stderr)
            if unreadable is not None:
                unreadable.append(str(e))
    return _merge_sharded(runs)


def _read_run(folder: Path) -> Run:
    config_path, records_path = folder / "config.yaml", folder / "records.jsonl"
    try:
        config = yaml.safe_load(config_path.read_text()) or {}
    except (OSError, ValueError, yaml.YAMLError) as e:
        raise UnreadableRunError(f"{config_path}: unreadable ({str(e).splitlines()[0]})") from None
    if not isinstance(config, dict):
        raise UnreadableRunError(f"{config_path}: unreadable (not a mapping of fields)")
    if records_path.exists():
        try:  # read lazily by the figures: a folder whose records cannot be opened is named now
            records_path.open("rb").close()
        except OSError as e:
            raise UnreadableRunError(f"{records_path}: unreadable ({e.strerror or e})") from None
    return Run(path=folder, config=config, summary=read_summary(folder))


def _is_shard(run: Run) -> bool:
    return bool(run.summary.get("shard") or (run.config.get("bench") or {}).get("shard"))


def _merge_sharded(runs: list[Run]) -> list[Run]:
    groups: dict[str, list[Run]] = {}
    for r in runs:
        # unsharded runs keep their own key: two equal configs in two folders stay two rows
        key = config_key(r.config) if _is_shard(r) else f"folder:{r.path}"
        groups.setdefault(key, []).append(r)
    out = []
    for members in groups.values():
        if len(members) == 1 and not _is_shard(members[0]):
            out.append(members[0])
            continue
        folders = [m.path for m in members]
        try:
            records, summary = merge_shards(folders)
        except ShardMergeError as e:  # e.g. one shard run twice in two output folders: show them apart
            print(f"memexp report: {e}; showing those shards separately", file=sys.stderr)
            out.extend(members)
            continue
        out.append(Run(path=folders[0], config=members[0].config, summary=summary, parts=folders, _records=records))
    return out


def by_bench(runs: list[Run]) -> dict[str, list[Run]]:
    """Runs per benchmark, and per task set where one benchmark's runs cover different tasks
    (key `<bench>_<task+task>`, or `<bench>_<k>tasks_<hash>` for more than three): a table or
    figure never mixes RULER with LongBench, nor averages one task set beside another."""
    sets: dict[str, set[tuple[str, ...]]] = {}
    for r in runs:
        sets.setdefault(r.bench, set()).add(r.task_set)
    out: dict[str, list[Run]] = {}
    for r in runs:
        out.setdefault(r.bench if len(sets[r.bench]) == 1 else f"{r.bench}_{_tasks_key(r.task_set)}", []).append(r)
    return dict(sorted(out.items()))


def _tasks_key(tasks: tuple[str, ...]) -> str:
    import hashlib

    if len(tasks) <= 3:
        return "+".join(tasks)
    return f"{len(tasks)}tasks_{hashlib.sha256(','.join(tasks).encode()).hexdigest()[:6]}"


def added_flops_percent(run: Run) -> dict[str, float]:
    """Per length: added FLOPs as % of Plain (100 * sum added / sum plain, as summarize) and the
    from the records' `costs` (memexp.costs.report.record_costs); lengths without modelled costs are left out."""
    sums: dict[str, list[float]] = {}
    for rec in run.records:
        c = rec.get("costs") or {}
        if c.get("added_flops") is None or not c.get("plain_flops"):
            continue
        s = sums.setdefault(str(rec["length"]), [0.0, 0.0])
        s[0] += c["added_flops"]
        s[1] += c["plain_flops"]
    return {n: 100.0 * a / p for n, (a, p) in sums.items()}
