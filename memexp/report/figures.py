"""The papers' figures from runs (matplotlib, Agg; every function writes one PNG).

- score vs context length per run, without NoteBank dashed, with NoteBank solid (NoteBank
  Figs. 1a, 3), for the mean over tasks or per task in a grid (Fig. 6); error bars are 95 %
  Wilson intervals over the n questions of each point;
- B x R heatmaps per length of a sweep (Figs. 11-12);
- score vs added analytical FLOPs with length labels (Figs. 8-10), from the records' costs;
- the stacked added-FLOPs breakdown of `memexp cost` per length (Fig. 7);
- routers side by side (Tables 3 / 8) as grouped bars.
Titles name the bench, the backbones and n; legends are the tables' row labels.
"""

from __future__ import annotations

import math
import sys
import textwrap
from pathlib import Path

from memexp.report.paper import PaperTable
from memexp.report.tables import INCOMPLETE, Sweep, Table, ordered
from memexp.results import labels as lb
from memexp.results.runs import Cell, Run, added_flops_percent
from memexp.results.stats import wilson


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


LEGEND_WIDTH = 0.95  # characters per inch of figure width a 7-pt legend line holds, with room to spare
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")  # one per curve: overlapping points stay apart


def _figure(plt, rows: int, cols: int, width: float, height: float, entries: int | list[str]):
    """A constrained-layout figure with room below the panels for a legend of `entries` (a
    count, or the labels themselves: each takes as many lines as it wraps to)."""
    lines = entries if isinstance(entries, int) else sum(len(_wrap(e, width).splitlines()) for e in entries)
    return plt.subplots(rows, cols, figsize=(width, height + 0.17 * lines), squeeze=False, layout="constrained")


def _wrap(label: str, width: float) -> str:
    return textwrap.fill(label, max(30, int(width * 10 * LEGEND_WIDTH)), break_long_words=True)


def _legend(fig, ax) -> None:
    """Below the panels, outside the axes, one entry a row, each label wrapped to the figure's width."""
    handles, names = ax.get_legend_handles_labels()
    if handles:
        width = fig.get_size_inches()[0]
        fig.legend(handles, [_wrap(n, width) for n in names], loc="outside lower center", fontsize=7, ncol=1)


def curve_labels(runs: list[Run]) -> list[str]:
    """Labels that say only what differs between the curves: the backbone and the method only
    when they differ (the title names the backbones), then the fields that differ."""
    configs = [r.config for r in runs]
    varying = [g for g in ("backbone", "method") if len({lb._name(c, g) for c in configs}) > 1]

    def base(config: dict) -> str:
        return " / ".join(lb._name(config, g) for g in varying)

    out = []
    for label, r in zip(lb.labels(configs, [r.path.name for r in runs], base=base), runs):
        label = label.strip()
        if label.startswith("(") and ")" in label:  # no base: "(router=bm25) [folder]" -> "router=bm25 [folder]"
            inner, _, rest = label[1:].partition(")")
            label = inner + rest
        out.append((label or lb.base_label(r.config)) + ("" if r.complete else INCOMPLETE))
    return out


def _offsets(count: int, spread: float = 0.12) -> list[float]:
    """x offsets (in category units) that set `count` curves' points at one length side by side."""
    if count < 2:
        return [0.0] * count
    return [spread * (k - (count - 1) / 2) / (count - 1) * 2 for k in range(count)]


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    _pyplot().close(fig)
    return path


def uses_notebank(run: Run) -> bool:
    return "notebank" in str(run.method.get("name", ""))


def _length_axes(ax, runs: list[Run], names: list[str], task: str | None, lengths: list[str],
                 paper_rows=()) -> list[int | None]:
    """One line per run on `ax`, each with its own marker and a small x offset so that equal
    points at one length stay apart; returns the n of every point drawn."""
    ns = []
    for k, (name, r, dx) in enumerate(zip(names, runs, _offsets(len(runs)))):
        row = r.by_length(task)
        pts = [(i, row[n]) for i, n in enumerate(lengths) if n in row and row[n].score is not None]
        if not pts:
            continue
        xs, cells = [p[0] + dx for p in pts], [p[1] for p in pts]
        ys = [c.score for c in cells]
        # max(0, .): the interval holds its point up to rounding at 0 % and 100 %
        lo = [max(0.0, c.score - wilson(c.score, c.n)[0]) if c.n else 0.0 for c in cells]
        hi = [max(0.0, wilson(c.score, c.n)[1] - c.score) if c.n else 0.0 for c in cells]
        ax.errorbar(xs, ys, yerr=[lo, hi], marker=MARKERS[k % len(MARKERS)], ms=4, capsize=3, label=name,
                    linestyle="-" if uses_notebank(r) else "--")
        ns += [c.n for c in cells]
    for name, cols in paper_rows:
        pts = [(i, cols[n].score) for i, n in enumerate(lengths) if n in cols]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], linestyle=":", marker="x", color="0.4", label=name)
    ax.set_xticks(range(len(lengths)), lengths)
    ax.set_ylim(-2, 102)
    ax.grid(alpha=0.3)
    return ns


def _paper_length_rows(paper, bench: str, runs: list[Run], lengths: list[str], task: str | None):
    """Paper rows whose columns are lengths (only for the mean over tasks: a paper's length
    table averages its tasks)."""
    if task is not None:
        return []
    backbones = {r.backbone for r in runs}
    rows = []
    for t in paper:
        if t.bench in {r.bench for r in runs} and (t.backbone is None or t.backbone in backbones):
            rows += [(t.label(k), {c: Cell(v) for c, v in cols.items() if c in lengths})
                     for k, cols in t.rows.items() if set(cols) & set(lengths)]
    return rows


def length_figure(path: Path, bench: str, runs: list[Run], task: str | None = None,
                  paper: list[PaperTable] = ()) -> Path:
    plt = _pyplot()
    lengths = ordered(n for r in runs for n in (r.by_length(task) if task else r.lengths()))
    paper_rows = _paper_length_rows(paper, bench, runs, lengths, task)
    names = curve_labels(runs)
    fig, axes = _figure(plt, 1, 1, 7.0, 4.0, names + [name for name, _ in paper_rows])
    ax = axes[0][0]
    ns = _length_axes(ax, runs, names, task, lengths, paper_rows)
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("score (%)")
    ax.set_title(lb.title(bench, [r.config for r in runs], ns, task or "mean over tasks"), fontsize=9)
    _legend(fig, ax)
    return _save(fig, path)


def task_grid_figure(path: Path, bench: str, runs: list[Run]) -> Path:
    plt = _pyplot()
    tasks = sorted({t for r in runs for t in r.tasks()})
    cols = min(3, len(tasks))
    rows = math.ceil(len(tasks) / cols)
    names, ns = curve_labels(runs), []
    fig, axes = _figure(plt, rows, cols, 4.2 * cols, 3.2 * rows + 0.4, names)
    for ax, task in zip(axes.flat, tasks):
        lengths = ordered(n for r in runs for n in r.by_length(task))
        ns += _length_axes(ax, runs, names, task, lengths)
        ax.set_title(task, fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(tasks):]:
        ax.axis("off")
    _legend(fig, axes.flat[0])
    fig.suptitle(lb.title(bench, [r.config for r in runs], ns, "per task"), fontsize=10)
    return _save(fig, path)


def heatmap_figure(path: Path, sweep: Sweep) -> Path:
    """One panel per length (and the mean): rows R, columns B, each cell its score and n."""
    plt = _pyplot()
    k = len(sweep.lengths)
    fig, axes = _figure(plt, 1, k, 2.6 * k + 0.6, 2.4 + 0.3 * len(sweep.replays), 0)
    for ax, length in zip(axes.flat, sweep.lengths):
        grid = [[sweep.cells.get((b, r), {}).get(length, Cell(None)) for b in sweep.spans] for r in sweep.replays]
        values = [[math.nan if c.score is None else c.score for c in row] for row in grid]
        ax.imshow(values, vmin=0, vmax=100, cmap="viridis", aspect="auto")
        for i, row in enumerate(grid):
            for j, c in enumerate(row):
                text = "-" if c.score is None else f"{c.score:.1f}" + (f"\nn={c.n}" if c.n is not None else "")
                ax.text(j, i, text, ha="center", va="center", fontsize=7,
                        color="black" if (c.score or 0) > 60 else "white")
        ax.set_xticks(range(len(sweep.spans)), [str(b) for b in sweep.spans])
        ax.set_yticks(range(len(sweep.replays)), [str(r) for r in sweep.replays])
        ax.set_xlabel("span budget B")
        ax.set_ylabel("replay budget R")
        ax.set_title(length, fontsize=9)
    fig.suptitle(sweep.title, fontsize=9)
    return _save(fig, path)


# what one configuration family varies along the FLOPs axis: NoteBank's budgets
BUDGETS = ("method.write_budget", "method.replay_budget", "method.span_budget")


def family(run: Run) -> str:
    """Runs equal in everything but the budgets: the only ones a FLOPs curve joins."""
    return lb.config_key({"_": {k: v for k, v in lb.flat(run.config).items() if k not in BUDGETS}})


def flops_figure(path: Path, bench: str, runs: list[Run]) -> Path | None:
    """Score vs added FLOPs (% of Plain, NoteBank Eq. 16) per run, each point labelled with its
    length; points of one length are joined across the runs of one configuration family
    (`family`: equal but for W / R / B). None when no run has modelled costs."""
    costed = [(r, added_flops_percent(r)) for r in runs]
    costed = [(r, c) for r, c in costed if any(v > 0 for v in c.values())]
    if not costed:
        return None
    plt = _pyplot()
    names = curve_labels([r for r, _ in costed])
    fig, axes = _figure(plt, 1, 1, 7.0, 4.0, names)
    ax = axes[0][0]
    joined: dict[tuple[str, str], list[tuple[float, float]]] = {}
    ns = []
    for k, (name, (r, pct)) in enumerate(zip(names, costed)):
        row = r.by_length()
        pts = [(pct[n], row[n], n) for n in ordered(pct) if n in row and row[n].score is not None]
        ax.plot([p[0] for p in pts], [p[1].score for p in pts], marker=MARKERS[k % len(MARKERS)], linestyle="none",
                label=name, alpha=0.85)
        for x, c, n in pts:
            ax.annotate(n, (x, c.score), textcoords="offset points", xytext=(4, 4), fontsize=7)
            joined.setdefault((family(r), n), []).append((x, c.score))
            ns.append(c.n)
    for pts in joined.values():
        if len(pts) > 1:
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color="0.7", linewidth=0.8, zorder=0)
    ax.set_xlabel("added analytical FLOPs (% of Plain)")
    ax.set_ylabel("score (%)")
    ax.set_ylim(-2, 102)
    ax.grid(alpha=0.3)
    ax.set_title(lb.title(bench, [r.config for r, _ in costed], ns, "score vs added FLOPs"), fontsize=9)
    _legend(fig, ax)
    return _save(fig, path)


PARTS = ("write", "probe", "route", "replay", "attention")  # memexp.costs.report notebank_added_flops' parts


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def recorded_counts(run: Run) -> dict[str, dict[str, float]]:
    """Per length: the records' mean context, question, output and replay tokens, notes and
    archived tokens (the counts memexp.costs.report.cost_report takes), where the records hold them."""
    keys = {"length": ("tokens", "context"), "question_tokens": ("tokens", "question"),
            "output_tokens": ("tokens", "generated"), "replay_tokens": ("tokens", "replay"),
            "notes": ("method_stats", "notes"), "archived_tokens": ("method_stats", "archived_tokens")}
    values: dict[str, dict[str, list[float]]] = {}
    for rec in run.records:
        per = values.setdefault(str(rec["length"]), {})
        for name, (group, key) in keys.items():
            v = (rec.get(group) or {}).get(key)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                per.setdefault(name, []).append(float(v))
    return {n: {k: _mean(v) for k, v in per.items()} for n, per in values.items()}


def _breakdown(run: Run) -> tuple[dict[str, dict[str, float]], set[str]] | None:
    """(per length: each added-FLOPs part as % of Plain, the counts cost_report had to assume),
    from memexp.costs.report.cost_report at the records' own mean counts (context, question, output and
    replayed tokens, notes): the breakdown of what the run did, not of the R x B bound. None:
    not costable."""
    from omegaconf import OmegaConf

    from memexp.core.schema import validate
    from memexp.costs.report import cost_report

    try:
        cfg = validate(OmegaConf.create(run.config))
        counts = recorded_counts(run)
        out, assumed = {}, set()
        for n in run.lengths():
            given = {k: v for k, v in (counts.get(n) or {}).items() if v is not None}
            context = given.pop("length", None) or (int(n) if n.isdigit() else None)
            if context:
                given = {k: (round(v) if k.endswith("tokens") and k != "replay_tokens" else v) for k, v in given.items()}
                report = cost_report(cfg, length=int(round(context)), **given)
                f = report["flops"]
                assumed |= set(report["inputs"]["assumed"])
                if f["added"]:
                    out[n] = {p: 100.0 * f["added"][p] / f["plain"] for p in PARTS if f["added"].get(p)}
        return (out, assumed) if out else None
    except Exception as e:  # a checkpoint whose shapes cannot be read offline: the figure omits it
        print(f"[memexp report] {run.path}: no FLOPs breakdown ({type(e).__name__}: {str(e).splitlines()[0][:120]})",
              file=sys.stderr)
        return None


def breakdown_figure(path: Path, bench: str, runs: list[Run]) -> Path | None:
    """Stacked added-FLOPs parts per length, one panel per NoteBank configuration (Fig. 7)."""
    unique: dict[str, Run] = {}
    for r in runs:
        if uses_notebank(r):
            unique.setdefault(lb.config_key({"b": r.config.get("backbone"), "m": r.method}), r)
    found = [(r, b) for r in unique.values() if (b := _breakdown(r))]
    if not found:
        return None
    parts = [(r, per_length) for r, (per_length, _) in found]
    assumed = sorted({a for _, (_, why) in found for a in why})
    plt = _pyplot()
    cols = min(3, len(parts))
    fig, axes = _figure(plt, math.ceil(len(parts) / cols), cols, 4.6 * cols, 3.6 * math.ceil(len(parts) / cols), 3)
    names = curve_labels([r for r, _ in parts])
    colors = dict(zip(PARTS, plt.rcParams["axes.prop_cycle"].by_key()["color"]))  # one colour per stage everywhere
    for ax, name, (_, per_length) in zip(axes.flat, names, parts):
        lengths = ordered(per_length)
        bottom = [0.0] * len(lengths)
        for part in PARTS:
            ys = [per_length[n].get(part, 0.0) for n in lengths]
            ax.bar(range(len(lengths)), ys, bottom=bottom, label=part, color=colors[part])
            bottom = [b + y for b, y in zip(bottom, ys)]
        ax.set_xticks(range(len(lengths)), lengths, fontsize=7)
        ax.set_xlabel("context length (tokens)")
        ax.set_ylabel("added FLOPs (% of Plain)")
        ax.set_title(textwrap.fill(name, 60), fontsize=7)
    for ax in list(axes.flat)[len(parts):]:
        ax.axis("off")
    handles, stages = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, stages, loc="outside lower center", fontsize=7, ncol=len(PARTS))
    caption = "at the records' mean context, question, output and replayed tokens and notes per length"
    if assumed:
        caption += "; not recorded, so bounded: " + ", ".join(assumed)
    fig.suptitle(f"{bench} · added analytical FLOPs by stage (memexp cost)\n"
                 + textwrap.fill(caption, int(fig.get_size_inches()[0] * 14)), fontsize=8)
    return _save(fig, path)


def bars_figure(path: Path, table: Table) -> Path:
    """A table as grouped bars: a group per row, a bar per column (routers side by side)."""
    plt = _pyplot()
    fig, axes = _figure(plt, 1, 1, max(6.0, 1.2 * len(table.rows) + 2), 4.2, len(table.columns))
    ax = axes[0][0]
    width = 0.8 / max(1, len(table.columns))
    for j, col in enumerate(table.columns):
        cells = [row.get(col) for _, row in table.rows]
        ys = [c.score if c and c.score is not None else 0.0 for c in cells]
        xs = [i + (j - (len(table.columns) - 1) / 2) * width for i in range(len(table.rows))]
        ax.bar(xs, ys, width=width, label=col)
    ax.set_xticks(range(len(table.rows)), [name for name, _ in table.rows], fontsize=7, rotation=15)
    ax.set_ylabel("score (%)")
    ax.set_ylim(0, 102)
    ax.grid(alpha=0.3, axis="y")
    ax.set_title(table.title, fontsize=9)
    _legend(fig, ax)
    return _save(fig, path)
