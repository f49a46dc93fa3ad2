"""The papers' own numbers, put beside memexp's in the report (`--paper FILE`).

Schema (a YAML file, e.g. beside an experiment preset under conf/experiment/):

    paper_numbers:            # one table, or a list of them
      source: "Table 1"       # where the numbers are printed (shown in the row label)
      bench: ruler            # bench.name of the runs they are compared with
      backbone: gdn           # backbone.name; optional (any backbone)
      rows:                   # method (or any row name) -> column -> score in [0, 100]
        plain: {4096: 90.1, 1M: 1.7}
        notebank: {niah_single_1: 99.0}

A column is a context length (an integer, or 4K / 1M meaning 4096 / 1048576) or a task
name, matched to the columns of memexp's method x length and method x task tables.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from memexp.config import ConfigError

_SIZE = re.compile(r"^(\d+)\s*([kKmM])$")


@dataclass(frozen=True)
class PaperTable:
    source: str
    bench: str
    backbone: str | None
    rows: dict[str, dict[str, float]]

    def label(self, row: str) -> str:
        who = f"{self.backbone} / " if self.backbone else ""
        return f"paper {self.source}: {who}{row}"


def column(key) -> str:
    """A paper's column name as memexp's tables write it: lengths as token counts."""
    text = str(key).strip()
    m = _SIZE.match(text)
    if m:
        return str(int(m.group(1)) * (1024 if m.group(2) in "kK" else 1024 ** 2))
    return text


def load(path: Path) -> list[PaperTable]:
    """The tables in one paper_numbers file; ConfigError (one line, the field) when malformed."""
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"--paper {path}: {str(e).splitlines()[0]}") from None
    if not isinstance(doc, dict) or "paper_numbers" not in doc:
        raise ConfigError(f"--paper {path}: expected a top-level 'paper_numbers' mapping (see memexp/report/paper.py)")
    entries = doc["paper_numbers"]
    entries = entries if isinstance(entries, list) else [entries]
    return [_table(path, i, e) for i, e in enumerate(entries)]


def _table(path: Path, i: int, e) -> PaperTable:
    where = f"--paper {path}: paper_numbers[{i}]"
    if not isinstance(e, dict):
        raise ConfigError(f"{where}: expected a mapping with source, bench, rows")
    for key in ("source", "bench", "rows"):
        if key not in e:
            raise ConfigError(f"{where}.{key}: missing")
    if not isinstance(e["rows"], dict) or not all(isinstance(v, dict) for v in e["rows"].values()):
        raise ConfigError(f"{where}.rows: expected {{row: {{column: score}}}}")
    rows = {}
    for name, cols in e["rows"].items():
        try:
            rows[str(name)] = {column(k): float(v) for k, v in cols.items()}
        except (TypeError, ValueError):
            raise ConfigError(f"{where}.rows.{name}: scores must be numbers") from None
    return PaperTable(str(e["source"]), str(e["bench"]), None if e.get("backbone") is None else str(e["backbone"]), rows)
