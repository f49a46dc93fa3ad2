"""The shipped options of a config group, listed on a page from the YAML files themselves.

A page writes `<!-- conf-options: backbone -->` (or `bench`, ...) where the list goes; this mkdocs
hook replaces the marker with one entry per file of that group: its name and the comment that heads
the file (what it is, where its checkpoint or data come from). So the Backbones and Benchmarks pages
never restate, and never fall behind, what conf/ says.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import memexp

MARKER = re.compile(r"<!-- conf-options: (\w+) -->")


def conf_dir() -> Path:
    """conf/ at the repository root (the redesign's place), else the package's memexp/conf/."""
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
    return " ".join(line for line in lines if line and not line.startswith("@package"))


def options(group: str) -> str:
    files = sorted((conf_dir() / group).glob("*.yaml"))
    if not files:
        raise FileNotFoundError(f"conf/{group}/ has no YAML files")
    return "\n".join(f"- **`{group}={f.stem}`**: {header(f) or '(no header comment)'}" for f in files)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return MARKER.sub(lambda m: options(m.group(1)), markdown)
