"""Tables (and a plot) comparing finished run folders.

  python -m memexp report [ROOT ...] [--task TASK] [--plot out.png] [--markdown]

Each run folder's config.yaml + summary.json become one row: backbone, method and the
method fields that differ between runs, then the score at every length.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml


def find_runs(roots: list[Path]) -> list[dict]:
    runs = []
    for root in roots:
        for summary_path in sorted(Path(root).rglob("summary.json")):
            cfg_path = summary_path.with_name("config.yaml")
            if not cfg_path.exists():
                continue
            runs.append({"path": summary_path.parent, "config": yaml.safe_load(cfg_path.read_text()),
                         "summary": json.loads(summary_path.read_text())})
    return runs


def _varying_method_fields(runs: list[dict]) -> list[str]:
    """Method fields that take more than one value among runs of the same method."""
    keys = sorted({k for r in runs for k in r["config"]["method"] if k != "name"})
    by_method: dict[str, list[dict]] = {}
    for r in runs:
        by_method.setdefault(r["config"]["method"]["name"], []).append(r["config"]["method"])
    return [k for k in keys if any(len({json.dumps(m.get(k)) for m in ms}) > 1 for ms in by_method.values())]


def label(run: dict, varying: list[str]) -> str:
    m = run["config"]["method"]
    # json keeps separators such as "\n\n" on one line (Markdown rows, plot legends)
    extra = ", ".join(f"{k}={json.dumps(m[k])}" for k in varying if k in m)
    return f"{run['config']['backbone']['name']} / {m['name']}" + (f" ({extra})" if extra else "")


def comparison(runs: list[dict], task: str | None) -> tuple[list[str], list[tuple[str, dict[str, float]]]]:
    """Rows of (label, {length: score}) for one task (or the mean over tasks)."""
    varying = _varying_method_fields(runs)
    lengths: set[str] = set()
    rows = []
    for r in runs:
        s = r["summary"]
        row = dict(s["scores"].get(task, {})) if task else dict(s.get("by_length", {}))
        lengths.update(row)
        rows.append((label(r, varying), row))
    ordered = sorted(lengths, key=lambda x: (0, int(x)) if x.isdigit() else (1, x))
    return ordered, sorted(rows)


def render(lengths: list[str], rows, markdown: bool) -> str:
    if markdown:
        out = ["| run | " + " | ".join(lengths) + " |", "|---|" + "---:|" * len(lengths)]
        out += ["| " + name + " | " + " | ".join(f"{row[n]:.1f}" if n in row else "-" for n in lengths) + " |"
                for name, row in rows]
        return "\n".join(out)
    w = max([len(name) for name, _ in rows] + [3]) + 2
    out = ["run".ljust(w) + "".join(n.rjust(9) for n in lengths)]
    out += [name.ljust(w) + "".join(f"{row[n]:9.1f}" if n in row else "        -" for n in lengths) for name, row in rows]
    return "\n".join(out)


def plot(lengths: list[str], rows, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    xs = list(range(len(lengths)))
    for name, row in rows:
        pts = [(i, row[n]) for i, n in enumerate(lengths) if n in row]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_xticks(xs, lengths)
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("score (%)")
    ax.set_ylim(-2, 102)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m memexp report", description=__doc__.splitlines()[0])
    p.add_argument("roots", nargs="*", default=["outputs/runs"], help="folders searched for run folders")
    p.add_argument("--task", help="one task's scores (default: mean over tasks)")
    p.add_argument("--plot", help="also write a PNG plot of score vs length here")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = p.parse_args(argv)
    runs = find_runs([Path(r) for r in args.roots])
    if not runs:
        print(f"no run folders with summary.json under {', '.join(args.roots)}")
        return 1
    lengths, rows = comparison(runs, args.task)
    print(render(lengths, rows, args.markdown))
    if args.plot:
        plot(lengths, rows, Path(args.plot), args.task or "mean over tasks")
    return 0
