"""The papers' own numbers, put beside memexp's in the report (`--paper FILE`).

Schema (a YAML file: one table, or a list of them):

    source: "Table 1"       # where the numbers are printed (shown in the row label)
    bench: ruler            # bench.name of the runs they are compared with
    backbone: gdn           # backbone.name; optional (any backbone)
    rows:                   # method (or any row name) -> column -> score in [0, 100]
      plain: {4096: 90.1, 1M: 1.7}
      notebank: {niah_single_1: 99.0}

A column is a context length (an integer, or 4K / 1M meaning 4096 / 1048576) or a task
name, matched to the columns of memexp's method x length and method x task tables.

memexp ships the papers' numbers of every paper preset in paper_numbers/: `<preset>.yaml`, or
`<preset>.<backbone>.yaml` for a preset that sweeps backbones; `--paper <preset>` reads them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from memexp.core.schema import ConfigError

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


PAPER_NUMBERS = Path(__file__).resolve().parent / "paper_numbers"


def shipped(preset: str) -> list[Path]:
    """The files holding a paper preset's numbers (one per backbone for a preset that sweeps them)."""
    return sorted(p for p in PAPER_NUMBERS.glob("*.yaml") if p.name.split(".")[0] == preset)


def resolve(spec: str) -> list[Path]:
    """`--paper`'s value: a file, or the name of a paper preset whose numbers memexp ships."""
    if Path(spec).expanduser().is_file():
        return [Path(spec).expanduser()]
    found = shipped(spec)
    if not found:
        presets = sorted({p.name.split(".")[0] for p in PAPER_NUMBERS.glob("*.yaml")})
        raise ConfigError(f"--paper {spec}: no such file, nor a paper preset; the presets with the papers' numbers "
                          f"are {', '.join(presets)}")
    return found


def load(path: Path) -> list[PaperTable]:
    """The tables in one paper numbers file; ConfigError (one line, the field) when malformed."""
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"--paper {path}: {str(e).splitlines()[0]}") from None
    entries = doc if isinstance(doc, list) else [doc]
    return [_table(path, i, e, len(entries) > 1) for i, e in enumerate(entries)]


def _table(path: Path, i: int, e, several: bool) -> PaperTable:
    where = f"--paper {path}" + (f": [{i}]" if several else "")
    if not isinstance(e, dict):
        raise ConfigError(f"{where}: expected a mapping with source, bench, rows")
    for key in ("source", "bench", "rows"):
        if key not in e:
            raise ConfigError(f"{where}: {key} is missing (a table has source, bench, rows; see memexp/report/paper.py)")
    if not isinstance(e["rows"], dict) or not all(isinstance(v, dict) for v in e["rows"].values()):
        raise ConfigError(f"{where}: rows must be {{row: {{column: score}}}}")
    rows = {}
    for name, cols in e["rows"].items():
        try:
            rows[str(name)] = {column(k): float(v) for k, v in cols.items()}
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: rows.{name}: scores must be numbers") from None
    return PaperTable(str(e["source"]), str(e["bench"]), None if e.get("backbone") is None else str(e["backbone"]), rows)
