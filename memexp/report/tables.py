"""The papers' tables from runs: method x length (NoteBank Tables 1/2, Fig. 1a's numbers),
method x task (Tables 1, 5, 6), the benchmark's aggregates (LongBench categories), routers
side by side (Tables 3 / 8) and B x R sweeps (Figs. 11-12's numbers); each renders as
Markdown, CSV, LaTeX or aligned text, every cell with its number of questions n."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

from memexp.report.paper import PaperTable
from memexp.results import labels as lb
from memexp.results.runs import Cell, Run
from memexp.run.records import _length_order

INCOMPLETE = " (incomplete)"
INCOMPLETE_NOTE = ("(incomplete): not every example recorded (summary.json has complete: false, or no summary.json "
                   "yet): cut short, a missing shard, killed, or still running")


@dataclass
class Table:
    name: str  # file stem
    title: str
    columns: list[str]
    rows: list[tuple[str, dict[str, Cell]]]
    corner: str = "run"
    notes: list[str] = field(default_factory=list)

    def to_markdown(self) -> str:
        out = [f"**{self.title}**", ""] if self.title else []
        out += ["| " + " | ".join([self.corner, *self.columns]) + " |", "|---|" + "---:|" * len(self.columns)]
        out += ["| " + " | ".join([name, *(_cell(row.get(c)) for c in self.columns)]) + " |" for name, row in self.rows]
        return "\n".join(out + ([""] + self.notes if self.notes else []))

    def to_text(self) -> str:
        cells = [[_cell(row.get(c)) for c in self.columns] for _, row in self.rows]
        w = max([len(n) for n, _ in self.rows] + [len(self.corner)]) + 2
        widths = [max([len(c)] + [len(r[i]) for r in cells]) + 2 for i, c in enumerate(self.columns)]
        out = [self.title] if self.title else []
        out.append(self.corner.ljust(w) + "".join(c.rjust(wi) for c, wi in zip(self.columns, widths)))
        out += [name.ljust(w) + "".join(v.rjust(wi) for v, wi in zip(r, widths)) for (name, _), r in zip(self.rows, cells)]
        return "\n".join(out + self.notes)

    def to_csv(self) -> str:
        """Wide: a score column and an n column per table column (empty: no value)."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow([self.corner] + [h for c in self.columns for h in (c, f"{c} n")])
        for name, row in self.rows:
            w.writerow([name] + [v for c in self.columns for v in _csv_pair(row.get(c))])
        return buf.getvalue()

    def to_latex(self) -> str:
        head = " & ".join(_tex(h) for h in [self.corner, *self.columns])
        body = [" & ".join([_tex(name)] + [_tex_cell(row.get(c)) for c in self.columns]) + r" \\"
                for name, row in self.rows]
        notes = "".join(f"\n% {n}" for n in self.notes)
        return "\n".join([r"\begin{table}[t]", r"\centering", rf"\caption{{{_tex(self.title)}}}",
                          rf"\begin{{tabular}}{{l{'r' * len(self.columns)}}}", r"\toprule", head + r" \\",
                          r"\midrule", *body, r"\bottomrule", r"\end{tabular}", r"\end{table}"]) + notes + "\n"

    def all_n(self) -> list[int | None]:
        return [c.n for name, row in self.rows if not name.startswith("paper ") for c in row.values()]


def _cell(c: Cell | float | None) -> str:
    if c is None:
        return "-"
    if not isinstance(c, Cell):
        c = Cell(float(c))
    if c.score is None:
        return "-"
    return f"{c.score:.1f}" + (f" (n={c.n})" if c.n is not None else "")


def _csv_pair(c: Cell | None) -> tuple[str, str]:
    if c is None or c.score is None:
        return ("", "")
    return (f"{c.score:.2f}", "" if c.n is None else str(c.n))


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
        "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def _tex(s: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in s)


def _tex_cell(c: Cell | None) -> str:
    if c is None or c.score is None:
        return "--"
    return f"{c.score:.1f}" + (rf" {{\scriptsize ({c.n})}}" if c.n is not None else "")


def row_labels(runs: list[Run], drop=(), base=lb.base_label) -> list[str]:
    out = lb.labels([r.config for r in runs], [r.path.name for r in runs], drop=drop, base=base)
    return [s + ("" if r.complete else INCOMPLETE) for s, r in zip(out, runs)]


def ordered(columns) -> list[str]:
    return sorted(set(columns), key=lambda x: _length_order(str(x)))


def _notes(runs: list[Run]) -> list[str]:
    """The incomplete mark explained, and which folder each numbered twin is."""
    out = [INCOMPLETE_NOTE] if any(not r.complete for r in runs) else []
    for name, r in zip(row_labels(runs), runs):
        if " #" in name:
            out.append(f"{name}: {r.path}")
    return out


def _paper_rows(paper: list[PaperTable], bench: str, runs: list[Run], columns: list[str]):
    backbones = {r.backbone for r in runs}
    out = []
    for t in paper:
        if t.bench not in {r.bench for r in runs} or (t.backbone is not None and t.backbone not in backbones):
            continue
        for name, cols in t.rows.items():
            hit = {c: Cell(v) for c, v in cols.items() if c in columns}
            if hit:
                out.append((t.label(name), hit))
    return out


def _table(name, title_what, bench, runs, columns, cells, paper=(), corner="run") -> Table:
    rows = sorted(zip(row_labels(runs), cells), key=lambda r: r[0])
    t = Table(name, "", columns, rows, corner=corner, notes=_notes(runs))
    t.rows += _paper_rows(list(paper), bench, runs, columns)
    t.title = lb.title(bench, [r.config for r in runs], t.all_n(), title_what)
    return t


def length_table(bench: str, runs: list[Run], task: str | None = None, paper=(), mean: bool = True) -> Table:
    """Method x length for one task or the mean over tasks; `mean` adds the row's overall score."""
    columns = ordered(n for r in runs for n in (r.by_length(task) if task else r.lengths()))
    cells = []
    for r in runs:
        row = dict(r.by_length(task))
        if mean:
            row["mean"] = r.by_task().get(task, Cell(None)) if task else r.overall()
        cells.append(row)
    name = f"{bench}_{task}_by_length" if task else f"{bench}_by_length"
    return _table(name, task or "mean over tasks", bench, runs, columns + (["mean"] if mean else []), cells, paper)


def task_table(bench: str, runs: list[Run], paper=()) -> Table:
    """Method x task, each task averaged over lengths, and the overall score."""
    columns = sorted({t for r in runs for t in r.tasks()})
    cells = [{**r.by_task(), "mean": r.overall()} for r in runs]
    return _table(f"{bench}_by_task", "by task", bench, runs, columns + ["mean"], cells, paper)


def aggregate_table(bench: str, runs: list[Run]) -> Table | None:
    """The benchmark's aggregates (LongBench's categories, Table 5); n is the run's questions."""
    columns = sorted({k for r in runs for k in r.aggregates()})
    if not columns:
        return None
    cells = [{k: Cell(v, r.summary.get("num_questions")) for k, v in r.aggregates().items()} for r in runs]
    return _table(f"{bench}_aggregates", "benchmark aggregates", bench, runs, columns, cells)


def router_table(bench: str, runs: list[Run]) -> Table | None:
    """Routers side by side (Tables 3 / 8): a row per router (and whatever else differs), a
    column per backbone with its overall score, and its score at the longest length."""
    nb = [r for r in runs if "router" in r.method]
    if len({r.method["router"] for r in nb}) < 2:
        return None
    drop = [k for k in {k for r in nb for k in lb.flat(r.config)} if k.startswith("backbone.")] + ["method.router"]
    names = row_labels(nb, drop=drop, base=lambda c: str(c["method"]["router"]))
    lengths = ordered(n for r in nb for n in r.lengths())
    longest = lengths[-1] if lengths and lengths[-1].isdigit() else None
    backbones = sorted({r.backbone for r in nb})
    columns = [c for b in backbones for c in ([b] + ([f"{b} @ {longest}"] if longest else []))]
    rows: dict[str, dict[str, Cell]] = {}
    for name, r in zip(names, nb):
        row = rows.setdefault(name, {})
        row[r.backbone] = r.overall()
        if longest and longest in r.by_length():
            row[f"{r.backbone} @ {longest}"] = r.by_length()[longest]
    t = Table(f"{bench}_routers", "", columns, sorted(rows.items()), corner="router", notes=_notes(nb))
    t.title = lb.title(bench, [r.config for r in nb], t.all_n(), "routers")
    return t


@dataclass
class Sweep:
    """A span budget B x replay budget R grid of NoteBank runs equal in everything else."""

    name: str
    title: str
    spans: list[int]
    replays: list[int]
    lengths: list[str]  # and "mean"
    cells: dict[tuple[int, int], dict[str, Cell]]  # (B, R) -> length -> cell

    def table(self) -> Table:
        rows = [(f"B={b}, R={r}", self.cells[(b, r)]) for r in self.replays for b in self.spans if (b, r) in self.cells]
        return Table(self.name, self.title, self.lengths, rows, corner="B, R")


SWEPT = ("method.span_budget", "method.replay_budget")


def sweeps(bench: str, runs: list[Run]) -> list[Sweep]:
    """Every B x R grid among `runs` (more than one value of B or of R, all else equal)."""
    groups: dict[str, list[Run]] = {}
    for r in runs:
        if "span_budget" in r.method and "replay_budget" in r.method:
            rest = {k: v for k, v in lb.flat(r.config).items() if k not in SWEPT}
            groups.setdefault(lb.config_key({"_": rest}), []).append(r)
    out = []
    for members in groups.values():
        spans = sorted({r.method["span_budget"] for r in members})
        replays = sorted({r.method["replay_budget"] for r in members})
        if len(spans) < 2 and len(replays) < 2:
            continue
        lengths = ordered(n for r in members for n in r.lengths()) + ["mean"]
        cells: dict[tuple[int, int], dict[str, Cell]] = {}
        for r in members:
            # equal configs in two folders: the later folder's run wins, as on a resume
            cells[(r.method["span_budget"], r.method["replay_budget"])] = {**r.by_length(), "mean": r.overall()}
        ns = [c.n for row in cells.values() for c in row.values()]
        suffix = f"_{len(out) + 1}" if out else ""
        what = "B x R sweep" + ("" if all(r.complete for r in members) else "; incomplete runs in the grid")
        head = lb.base_label(members[0].config)
        out.append(Sweep(f"{bench}_B_R{suffix}", lb.title(bench, [m.config for m in members], ns, f"{head}, {what}"),
                         spans, replays, lengths, cells))
    return out


def bench_tables(bench: str, runs: list[Run], paper=()) -> list[Table]:
    """Every table of one benchmark's runs."""
    tables = [length_table(bench, runs, paper=paper), task_table(bench, runs, paper)]
    tasks = sorted({t for r in runs for t in r.tasks()})
    if len(tasks) > 1:
        tables += [length_table(bench, runs, task=t, paper=paper) for t in tasks]
    tables += [t for t in (aggregate_table(bench, runs), router_table(bench, runs)) if t is not None]
    tables += [s.table() for s in sweeps(bench, runs)]
    return tables
