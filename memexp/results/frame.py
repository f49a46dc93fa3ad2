"""Run folders as one tidy DataFrame: a row per question, a column per config field.

Runs are found as `memexp report` finds them (memexp.results.runs: run folders, folders above
them, sweep folders; shards of one configuration merged). A row holds the run (`run`: its
folder's name, `run_path`, `complete`), every field of its config.yaml dotted
(`method.replay_budget`; lists and dicts as JSON text), `task_set` (the tasks the run covers,
JSON), the question (`example_id`, `question_id`, `task`, `length`, `metric`, `score`,
`prediction`) and its numbers: `tokens.<kind>`, `seconds.<stage>`, `costs.<field>`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

if TYPE_CHECKING:
    import pandas as pd

NUMBERS = ("tokens", "seconds", "costs")  # a record's dicts of numbers, one column per key


def flatten(config: dict, prefix: str = "") -> dict[str, Any]:
    """{"method.replay_budget": 2, "bench.tasks": '["qa_1"]', ...}: scalars as they are, lists and
    dicts that are values (backbone.model) as JSON text, so that every column is comparable."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and not prefix and key != "hydra":
            out.update(flatten(value, f"{name}."))
        elif isinstance(value, (list, dict)):
            out[name] = json.dumps(value, sort_keys=True)
        else:
            out[name] = value
    return out


def _parse_value(text: str) -> Any:
    """A `--where` value read as YAML reads it (2 -> int, null -> None, [a,b] -> list), then in the
    frame's own form (lists as JSON text)."""
    import yaml

    value = yaml.safe_load(text) if text.strip() else ""
    return json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else value


def where_filter(where: str | Sequence[str] | None) -> list[tuple[str, str, Any]]:
    """`field=value` / `field!=value` conditions (a string, or several, all of which must hold)."""
    if where is None:
        return []
    items = [where] if isinstance(where, str) else list(where)
    out = []
    for item in items:
        for part in (p.strip() for p in item.split(" and ")):
            op = "!=" if "!=" in part else "="
            key, sep, value = part.partition(op)
            if not sep or not key.strip():
                raise ValueError(f"--where {part!r}: write field=value or field!=value (e.g. method.name=notebank)")
            out.append((key.strip(), op, _parse_value(value.strip())))
    return out


def _same(a: Any, b: Any) -> bool:
    """Equal as values, or as text when the types differ (`bench.shard=0/2` against "0/2")."""
    return a == b or (type(a) is not type(b) and str(a) == str(b))


def _keep(fields: dict[str, Any], conditions: list[tuple[str, str, Any]]) -> bool:
    return all(_same(fields.get(key), value) == (op == "=") for key, op, value in conditions)


def _check_keys(conditions, known: set[str]) -> None:
    import difflib

    for key, _, _ in conditions:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            raise KeyError(f"--where {key}: no run has this field" + (f"; did you mean {close[0]}?" if close else ""))


def _question_rows(run, fields: dict[str, Any]) -> Iterable[dict[str, Any]]:
    for rec in run.records:
        row = {**fields, "example_id": str(rec.get("example_id")), "question_id": str(rec.get("question_id")),
               "task": rec.get("task"), "length": str(rec.get("length")), "metric": rec.get("metric"),
               "score": float(rec.get("score", 0.0)), "prediction": rec.get("prediction")}
        for group in NUMBERS:
            row.update({f"{group}.{k}": v for k, v in (rec.get(group) or {}).items()
                        if isinstance(v, (int, float)) or v is None})
        yield row


def select(runs: list, where: str | Sequence[str] | None) -> list[tuple[Any, dict[str, Any]]]:
    """(run, its flattened fields) of every run whose config satisfies `where`; a field no run has
    is a KeyError naming the closest one."""
    conditions = where_filter(where)
    flats = [{"run": r.path.name, "run_path": str(r.path), "complete": r.complete, **flatten(r.config),
              "task_set": json.dumps(list(r.task_set))} for r in runs]
    _check_keys(conditions, {k for f in flats for k in f})
    return [(r, f) for r, f in zip(runs, flats) if _keep(f, conditions)]


def load_runs(paths: str | Path | Sequence[str | Path], where: str | Sequence[str] | None = None) -> pd.DataFrame:
    """Every question of every run under `paths` whose config satisfies `where`
    (`"method.name=notebank"`, `["method.router!=oracle", "bench.name=ruler"]`), one row each."""
    from memexp.results.runs import find_runs

    roots = [paths] if isinstance(paths, (str, Path)) else list(paths)
    return frame(select(find_runs([Path(p).expanduser() for p in roots]), where))


def frame(selected: list[tuple[Any, dict[str, Any]]]) -> pd.DataFrame:
    """The question rows of `select`'s runs."""
    import pandas as pd

    return pd.DataFrame([row for run, fields in selected for row in _question_rows(run, fields)])
