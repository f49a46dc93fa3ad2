"""`python -m memexp dashboard`: a W&B workspace with the panels the NoteBank paper's figures
correspond to, over the metrics memexp.run.tracking logs.

Per benchmark, three sections:
- score vs context length, one line per run (runs are named bench | backbone | method | fields):
  one panel per task (Figs. 1a, 3, 6) and one for the mean over tasks; x = the `length` axis;
- cost: score vs added FLOPs (% of Plain, NoteBank Eq. 16), one point per run from the summaries,
  and the per-length curve of mean score against added FLOPs (Figs. 8-10);
- sweep: parallel coordinates over W / R / B / C (method.write_budget, replay_budget, span_budget,
  chunk_size) to the overall score (Figs. 11-12).

`dashboard_spec` builds the panels as plain data (no network, no wandb import): the test checks it
and offline it is what gets printed and saved. `to_workspace` turns it into a wandb-workspaces
`Workspace`; saving one needs credentials (`wandb login` or WANDB_API_KEY) and the network.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from memexp.core.schema import ConfigError, LoggerConfig, PathsConfig

SWEEP_AXES = (("W", "method.write_budget"), ("R", "method.replay_budget"), ("B", "method.span_budget"),
              ("C", "method.chunk_size"))
LENGTH = "length"  # the history x-axis memexp.run.tracking defines


def dashboard_spec(benches: dict[str, list[str]], name: str = "memexp") -> dict[str, Any]:
    """The workspace as data. An axis is a history metric (a string), {"summary": key} or
    {"config": key}; `benches` maps each benchmark to its tasks."""
    sections = []
    for bench, tasks in benches.items():
        lines = [_line(f"{bench} | {task}: score vs context length", LENGTH, f"{bench}/{task}/score", "length (tokens)")
                 for task in tasks]
        lines.append(_line(f"{bench} | mean over {len(tasks)} task(s): score vs context length", LENGTH,
                           f"{bench}/mean/score", "length (tokens)"))
        cost = [
            {"kind": "scatter", "title": f"{bench}: overall score vs added FLOPs",
             "x": {"summary": f"{bench}/added_flops_ratio"}, "y": {"summary": f"{bench}/overall/score"}},
            _line(f"{bench}: mean score vs added FLOPs, one point per length", f"{bench}/added_flops_ratio",
                  f"{bench}/mean/score", "added FLOPs (% of Plain)"),
        ]
        columns = [{"label": label, "axis": {"config": key}} for label, key in SWEEP_AXES]
        columns.append({"label": "score", "axis": {"summary": f"{bench}/overall/score"}})
        sweep = [{"kind": "parallel", "title": f"{bench}: sweep over W / R / B / C", "columns": columns}]
        sections += [{"name": f"{bench}: score vs context length", "panels": lines},
                     {"name": f"{bench}: cost", "panels": cost},
                     {"name": f"{bench}: sweep (W / R / B / C)", "panels": sweep}]
    return {"name": name, "sections": sections}


def _line(title: str, x: str, y: str, x_title: str) -> dict[str, Any]:
    return {"kind": "line", "title": title, "x": x, "y": [y], "x_title": x_title, "y_title": "score"}


def describe(spec: dict[str, Any]) -> str:
    """What the workspace holds, one line per panel."""
    lines = [f"workspace {spec['name']!r}"]
    for section in spec["sections"]:
        lines.append(f"  section {section['name']!r}")
        for p in section["panels"]:
            if p["kind"] == "parallel":
                axes = ", ".join(c["label"] for c in p["columns"])
                lines.append(f"    parallel coordinates {p['title']!r}: {axes}")
            else:
                y = p["y"][0] if p["kind"] == "line" else p["y"]
                lines.append(f"    {p['kind']} {p['title']!r}: {_axis_name(y)} vs {_axis_name(p['x'])}")
    return "\n".join(lines)


def _axis_name(axis: str | dict) -> str:
    return axis if isinstance(axis, str) else next(f"{k}:{v}" for k, v in axis.items())


def to_workspace(spec: dict[str, Any], entity: str, project: str):
    """The spec as a wandb-workspaces Workspace (built locally; `.save()` creates it on W&B)."""
    import wandb_workspaces.reports.v2 as wr
    import wandb_workspaces.workspaces as ws

    def axis(a):
        if isinstance(a, str):
            return a
        kind, key = next(iter(a.items()))
        return wr.SummaryMetric(key) if kind == "summary" else wr.Config(key)

    def panel(p):
        if p["kind"] == "line":
            return wr.LinePlot(title=p["title"], x=axis(p["x"]), y=[axis(y) for y in p["y"]], title_x=p["x_title"],
                               title_y=p["y_title"], legend_template="${run:displayName}")
        if p["kind"] == "scatter":
            return wr.ScatterPlot(title=p["title"], x=axis(p["x"]), y=axis(p["y"]))
        return wr.ParallelCoordinatesPlot(title=p["title"], columns=[
            wr.ParallelCoordinatesPlotColumn(metric=axis(c["axis"]), display_name=c["label"]) for c in p["columns"]])

    sections = [ws.Section(name=s["name"], panels=[panel(p) for p in s["panels"]], is_open=True)
                for s in spec["sections"]]
    return ws.Workspace(entity=entity, project=project, name=spec["name"], sections=sections)


def benches_from_runs(runs_dir: Path) -> dict[str, list[str]]:
    """Each benchmark's tasks, from the summaries of the run folders under `runs_dir`
    (<bench>/<backbone>/<method>/<hash>/summary.json)."""
    found: dict[str, set[str]] = {}
    for path in sorted(Path(runs_dir).glob("*/*/*/*/summary.json")):
        bench = path.relative_to(runs_dir).parts[0]
        found.setdefault(bench, set()).update(json.loads(path.read_text()).get("scores", {}))
    return {b: sorted(t) for b, t in sorted(found.items()) if t}


def benches_from_args(values: list[str]) -> dict[str, list[str]]:
    """`--bench NAME[:task,task]`; without tasks, those the benchmark's schema runs by default."""
    from memexp.core.registry import BENCHES

    out = {}
    for value in values:
        name, _, tasks = value.partition(":")
        if name not in BENCHES:
            raise ConfigError(f"--bench {name!r}:" + BENCHES.unknown_message(name).split(":", 1)[1])
        if not tasks:
            schema = BENCHES.get(name).load_schema()
            tasks = ",".join(getattr(schema(), "tasks", None) or [name])
        out[name] = tasks.split(",")
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m memexp dashboard", description=__doc__.split("\n\n")[0])
    p.add_argument("--entity", help="W&B entity (default: your default entity)")
    p.add_argument("--project", default=LoggerConfig.project, help="W&B project (default: %(default)s)")
    p.add_argument("--name", default="memexp", help="the workspace's name (default: %(default)s)")
    p.add_argument("--runs", default=PathsConfig.runs,
                   help="run folders whose summaries name the tasks (default: %(default)s under $MEMEXP_ROOT)")
    p.add_argument("--bench", action="append", default=[], metavar="NAME[:task,task]",
                   help="benchmarks (and tasks) to lay out instead of those found under --runs")
    p.add_argument("--url", help="update this existing workspace (its URL) instead of creating a new one")
    p.add_argument("--out", default="outputs/dashboard.json",
                   help="where the spec is saved (default: %(default)s under $MEMEXP_ROOT)")
    return p


def main(argv: list[str]) -> int:
    from memexp.core.paths import under_root
    from memexp.run.tracking import has_wandb_credentials

    args = _parser().parse_args(argv)
    benches = benches_from_args(args.bench) if args.bench else benches_from_runs(under_root(args.runs))
    if not benches:
        raise ConfigError(f"--runs {args.runs}: no run folders with results; run something first or name "
                          "benchmarks with --bench NAME[:task,task]")
    spec = dashboard_spec(benches, args.name)
    out = under_root(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(spec, indent=2) + "\n")
    mode = os.environ.get("WANDB_MODE")
    offline = f"WANDB_MODE={mode}" if mode in ("offline", "disabled", "dryrun") else \
        None if has_wandb_credentials() else "no W&B credentials"
    if offline:
        print(f"[memexp] offline ({offline}): would {'update ' + args.url if args.url else 'create'} "
              f"in {args.entity or '<default entity>'}/{args.project}:")
        print(describe(spec))
        print(f"[memexp] spec saved to {out}")
        return 0
    try:
        import wandb_workspaces.workspaces as ws
    except ImportError:
        raise ConfigError('dashboard: needs wandb-workspaces, pip install -e ".[dashboard]"') from None
    import wandb

    entity = args.entity or wandb.Api().default_entity
    workspace = to_workspace(spec, entity, args.project)
    if args.url:
        existing = ws.Workspace.from_url(args.url)
        existing.sections = workspace.sections
        workspace = existing
    workspace.save()
    print(f"[memexp] workspace saved: {workspace.url}", file=sys.stderr)
    return 0
