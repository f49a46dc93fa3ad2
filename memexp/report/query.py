"""`report --where --by --label --csv`: the report's tables from memexp.results' frame and summary.

--where keeps the runs whose config satisfies it; --by groups their questions by config fields
(a row per group; runs of different benchmarks or task sets land in separate tables, never in one
mean); --label names a row from its fields (`{method.router}`); --csv writes the summary in long
format (one line per group x task x length, with n and the Wilson interval).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Sequence

from memexp.report.tables import Table, ordered
from memexp.results.runs import Cell
from memexp.results.stats import ALL, NEVER_POOLED, group_keys, summarize

_FIELD = re.compile(r"\{([^{}]+)\}")


def where_runs(runs: list, where: list[str], command: str) -> list | None:
    """The runs `--where` keeps; None (the reason printed) for a field no run has or a malformed
    condition; an empty list (said) when none matches."""
    if not where:
        return runs
    from memexp.results.frame import select

    try:
        kept = [r for r, _ in select(runs, where)]
    except (KeyError, ValueError) as e:
        print(f"memexp: {command}: {e.args[0]}", file=sys.stderr)
        return None
    if not kept:
        print(f"memexp: {command}: no run matches --where {' '.join(where)}", file=sys.stderr)
    return kept


def row_label(template: str | None, fields: dict) -> str:
    """`template` with each `{field}` replaced by the group's value (dotted names, unlike
    str.format); without a template, `field=value` of every grouping field."""
    if template is None:
        return ", ".join(f"{k}={v}" for k, v in fields.items()) or "all runs"

    def value(m: re.Match) -> str:
        if m.group(1) not in fields:
            raise KeyError(f"--label {{{m.group(1)}}}: not a --by field; the fields are {', '.join(fields)}")
        return str(fields[m.group(1)])

    return _FIELD.sub(value, template)


def grouped(df, by: Sequence[str], label: str | None):
    """summarize(df, by) with a `label` column; label fields beyond `by` join the grouping."""
    wanted = [f for f in _FIELD.findall(label or "") if f not in by]
    keys = list(dict.fromkeys([*by, *wanted]))
    summary = summarize(df, keys)
    shown = group_keys(df, keys)
    apart = [k for k in shown if k in NEVER_POOLED and k not in keys]
    summary["label"] = [row_label(label, {k: row[k] for k in keys}) for _, row in summary.iterrows()]
    return summary, apart


def tables(summary, apart: list[str], task: str | None) -> list[Table]:
    """A label x length table (and the pooled `mean`) per benchmark / task set, for one task or all."""
    out = []
    parts = summary.groupby(apart, sort=True) if apart else [((), summary)]
    for key, part in parts:
        key = key if isinstance(key, tuple) else (key,)
        rows = part[part["task"] == (task or ALL)]
        lengths = ordered(n for n in rows["length"] if n != ALL)
        cells: dict[str, dict[str, Cell]] = {}
        for _, r in rows.iterrows():
            cells.setdefault(r["label"], {})["mean" if r["length"] == ALL else r["length"]] = Cell(r["score"], r["n"])
        title = " · ".join([*(f"{k}={v}" for k, v in zip(apart, key)), task or "mean over tasks"])
        out.append(Table("query", title, [*lengths, "mean"], sorted(cells.items()), corner="group"))
    return out


def write_csv(summary, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    cols = ["label", *(c for c in summary.columns if c != "label")]
    summary[cols].to_csv(path, index=False, float_format="%.4f")
    return path
