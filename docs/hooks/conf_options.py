"""The shipped options of a config group, and the papers' numbers, listed on a page from conf/ itself.

A page writes `<!-- conf-options: backbone -->` (or `bench`, ...) where the list goes; this mkdocs
hook replaces the marker with one entry per file of that group: its name and the comment that heads
the file (what it is, where its checkpoint or data come from). `<!-- paper-numbers: titan_ -->`
becomes one table per paper-numbers file (paper_numbers_files) whose preset's name starts so: the
paper's own numbers for that preset, as the file holds them. So the pages never restate, and never
fall behind, what conf/ says.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import yaml

import memexp

MARKER = re.compile(r"<!-- conf-options: (\w+) -->")
PAPER_MARKER = re.compile(r"<!-- paper-numbers: (\w+) -->")


def conf_dir() -> Path:
    """conf/ at the repository root (the redesign's place), else the conf folder inside the package (before it)."""
    package = Path(memexp.__file__).resolve().parent
    for candidate in (package.parent / "conf", package / "conf"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"no conf/ beside {package}")


def header(path: Path) -> str:
    """The comment lines that open a YAML file, joined into one paragraph."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    text = " ".join(line for line in lines if line and not line.startswith("@package"))
    # shown as text: `<subset>.jsonl` is no HTML tag, `*` no emphasis
    return html.escape(text, quote=False).replace("*", "\\*")


def options(group: str) -> str:
    files = sorted((conf_dir() / group).glob("*.yaml"))
    if not files:
        raise FileNotFoundError(f"conf/{group}/ has no YAML files")
    return "\n".join(f"- **`{group}={f.stem}`**: {header(f) or '(no header comment)'}" for f in files)


def paper_numbers_files(prefix: str) -> list[Path]:
    """The presets' paper-numbers files whose names start with `prefix`, beside the report that reads
    them (memexp/report/paper_numbers/<preset>[.<backbone>].yaml)."""
    from memexp.report.paper import PAPER_NUMBERS

    files = sorted(PAPER_NUMBERS.glob(f"{prefix}*.yaml"))
    if not files:
        raise FileNotFoundError(f"no paper-numbers file for presets {prefix}*")
    return files


def paper_numbers(prefix: str) -> str:
    files = paper_numbers_files(prefix)
    out = []
    for f in files:
        table = yaml.safe_load(f.read_text())
        columns = list(dict.fromkeys(str(c) for row in table["rows"].values() for c in row))
        backbone = f", {table['backbone']}" if table.get("backbone") else ""
        out += [f"#### `{f.name.split('.')[0]}`: {table['source']} ({table['bench']}{backbone})", "",
                "| row | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
        for name, row in table["rows"].items():
            cells = {str(k): v for k, v in row.items()}
            out.append(f"| {name} | " + " | ".join(str(cells.get(c, "")) for c in columns) + " |")
        out.append("")
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    markdown = PAPER_MARKER.sub(lambda m: paper_numbers(m.group(1)), markdown)
    return MARKER.sub(lambda m: options(m.group(1)), markdown)
