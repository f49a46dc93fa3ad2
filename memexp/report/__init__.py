"""memexp report: the papers' tables and figures from run folders.

  python -m memexp report [ROOT ...] [--task TASK] [--markdown] [--plot out.png]
                          [--tables DIR] [--figures DIR] [--paper FILE ...]
                          [--where FIELD=VALUE ...] [--by FIELD ...] [--label TEMPLATE] [--csv FILE]

ROOTs are run folders or folders above them (outputs/runs, outputs/runs/ruler/tiny_gdn) or
sweep folders (multirun/<date>/<time>/, whose job folders point to their run folders).
Shards of one configuration become one run; each benchmark gets its own tables and figures.
Without --tables / --figures it prints the method x length table of every benchmark.

--tables DIR writes, per benchmark, every table (tables.py) as .md, .csv and .tex;
--figures DIR every figure (figures.py) as .png; --plot one score-vs-length figure;
--paper PRESET|FILE adds a paper's numbers (schema in paper.py) beside memexp's.
--where keeps the runs whose config matches; --by / --label / --csv print and write the
summary of memexp.results grouped by config fields (report/query.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memexp.report.paper import PaperTable, load, resolve
from memexp.report.tables import Table, bench_tables, length_table, sweeps
from memexp.results.runs import Cell, Run, by_bench, find_runs

__all__ = ["comparison", "find_runs", "render", "main", "write_report"]


def comparison(runs: list[Run], task: str | None) -> tuple[list[str], list[tuple[str, dict[str, float]]]]:
    """Rows of (label, {length: score}) for one task (or the mean over tasks), sorted by label."""
    t = length_table("", runs, task, mean=False)
    return t.columns, [(name, {k: c.score for k, c in row.items()}) for name, row in t.rows]


def render(lengths: list[str], rows, markdown: bool) -> str:
    """`comparison`'s rows as a Markdown or aligned text table (values: scores or Cells)."""
    cells = [(name, {k: v if isinstance(v, Cell) else Cell(v) for k, v in row.items()}) for name, row in rows]
    t = Table("", "", lengths, cells)
    return t.to_markdown() if markdown else t.to_text()


def _suffixed(path: Path, bench: str, several: bool) -> Path:
    return path.with_name(f"{path.stem}_{bench}{path.suffix}") if several else path


def write_report(runs: list[Run], tables_dir: Path | None, figures_dir: Path | None,
                 paper: list[PaperTable] = ()) -> list[Path]:
    """Every table and figure of every benchmark among `runs`; returns the files written."""
    from memexp.report import figures as fg

    written: list[Path] = []
    for bench, group in by_bench(runs).items():
        tables = bench_tables(bench, group, paper)
        if tables_dir is not None:
            tables_dir.mkdir(parents=True, exist_ok=True)
            for t in tables:
                for ext, text in (("md", t.to_markdown()), ("csv", t.to_csv()), ("tex", t.to_latex())):
                    (tables_dir / f"{t.name}.{ext}").write_text(text + ("" if text.endswith("\n") else "\n"))
                    written.append(tables_dir / f"{t.name}.{ext}")
        if figures_dir is None:
            continue
        figures_dir.mkdir(parents=True, exist_ok=True)
        out = [fg.length_figure(figures_dir / f"{bench}_length.png", bench, group, paper=paper),
               fg.task_grid_figure(figures_dir / f"{bench}_length_by_task.png", bench, group),
               fg.flops_figure(figures_dir / f"{bench}_flops.png", bench, group),
               fg.breakdown_figure(figures_dir / f"{bench}_flops_breakdown.png", bench, group)]
        out += [fg.heatmap_figure(figures_dir / f"{s.name}.png", s) for s in sweeps(bench, group)]
        routers = next((t for t in tables if t.name == f"{bench}_routers"), None)
        if routers is not None:
            out.append(fg.bars_figure(figures_dir / f"{bench}_routers.png", routers))
        written += [p for p in out if p is not None]
    return written


def _query(runs: list[Run], args) -> int:
    """The --by / --label / --csv report, from memexp.results."""
    from memexp.report import query
    from memexp.results.frame import frame, select

    by = [f.strip() for item in args.by for f in item.split(",") if f.strip()] or ["run"]
    try:
        summary, apart = query.grouped(frame(select(runs, None)), by, args.label)
    except KeyError as e:
        print(f"memexp: report: {e.args[0]}", file=sys.stderr)
        return 2
    for t in query.tables(summary, apart, args.task):
        print((t.to_markdown() if args.markdown else t.to_text()) + "\n")
    if args.csv:
        print(f"[memexp report] wrote {query.write_csv(summary, Path(args.csv))}")
    return 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m memexp report", description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="example: python -m memexp report outputs/runs/ruler/tiny_gdn --figures docs/")
    p.add_argument("roots", nargs="*", default=["outputs/runs"], help="run, run-root or sweep folders")
    p.add_argument("--task", help="printed table and --plot: one task's scores (default: mean over tasks)")
    p.add_argument("--markdown", action="store_true", help="print Markdown tables")
    p.add_argument("--plot", help="write one PNG of score vs length here (one per benchmark: <stem>_<bench>.png)")
    p.add_argument("--tables", help="write every table here as .md, .csv and .tex")
    p.add_argument("--figures", help="write every figure here as .png")
    p.add_argument("--paper", action="append", default=[], help="a paper preset (its shipped numbers) or a paper numbers YAML file (repeatable)")
    p.add_argument("--where", action="append", default=[], metavar="FIELD=VALUE",
                   help="only runs whose config field equals (or with !=, differs from) the value; repeatable")
    p.add_argument("--by", action="append", default=[], metavar="FIELD",
                   help="a row per value of these config fields (comma-separated or repeated), from every "
                        "question of the runs: n and the 95 %% Wilson interval per cell")
    p.add_argument("--label", help="row names for --by, e.g. '{method.router}' (default: field=value)")
    p.add_argument("--csv", help="write the --by summary (or one row per run) here, long format")
    args = p.parse_args(argv)
    paper = [t for spec in args.paper for f in resolve(spec) for t in load(f)]
    missing = [r for r in args.roots if not Path(r).expanduser().exists()]
    if missing:
        print(f"memexp: report: {missing[0]}: no such folder", file=sys.stderr)
        return 2
    unreadable: list[str] = []
    runs = find_runs([Path(r) for r in args.roots], unreadable)
    if not runs:
        print(f"memexp: report: no run folders (config.yaml with summary.json or records.jsonl) under "
              f"{', '.join(args.roots)}", file=sys.stderr)
        return 1
    if args.where:
        from memexp.report.query import where_runs

        runs = where_runs(runs, args.where, "report")
        if not runs:
            return 2 if runs is None else 1
    if args.by or args.label or args.csv:
        return _query(runs, args)
    groups = by_bench(runs)
    for bench, group in groups.items():
        t = length_table(bench, group, args.task, paper=paper)
        print((t.to_markdown() if args.markdown else t.to_text()) + "\n")
        if args.plot:
            from memexp.report.figures import length_figure

            path = length_figure(_suffixed(Path(args.plot), bench, len(groups) > 1), bench, group, args.task, paper)
            print(f"[memexp report] wrote {path}")
    written = write_report(runs, args.tables and Path(args.tables), args.figures and Path(args.figures), paper)
    if written:
        print(f"[memexp report] wrote {len(written)} files: {', '.join(sorted({str(w.parent) for w in written}))}")
    return 1 if unreadable else 0  # the report is made, but not of every folder asked for
