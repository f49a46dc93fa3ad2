"""Where benchmark data comes from: a local override, memexp's cache, the Hugging Face cache,
or a download.

Every hub or web benchmark resolves its data the same way: `bench.data_path` when set;
else the benchmark's `cache_dir` once complete; else it is filled from the hub files, read
from the Hugging Face hub cache first (memexp.benchmarks.hub) and downloaded only when
online. `python -m memexp data bench=<name>` does the same ahead of time. Offline
(`HF_HUB_OFFLINE=1`: cache only) with neither cache holding the data, a run stops with one
line naming the missing hub file or URL, the command that fetches it and the override that
gives a local path. Rows that miss fields are reported with their file and row and skipped,
never a stack trace.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from memexp.benchmarks import hub
from memexp.benchmarks.hub import NotCached, offline

log = logging.getLogger("memexp.cli.data")

_COMPLETE = ".complete"  # written last, so a half-finished download never counts as cached


class BenchmarkDataError(ValueError):
    """A benchmark's data is missing or unusable; the message is one line with the fix."""


@dataclass(frozen=True)
class SourceRow:
    """One record and where it came from, for error messages."""

    source: str
    index: int  # 0-based row (line) number within `source`
    data: Any


def fix_hint(bench: str, local: str = "a local copy") -> str:
    """How to get the data: `local` says what bench.data_path names for this benchmark."""
    return (f"run `python -m memexp data bench={bench}` on a connected machine (same bench.cache_dir "
            f"or Hugging Face cache), or set bench.data_path={local}")


def resolve(bench: str, data_path: str | None, cache_dir: str, download: Callable[[Path], None],
            local: str = "a local copy") -> Path:
    """The local path holding the benchmark's data, filling `cache_dir` if needed."""
    if data_path:
        path = Path(data_path).expanduser()
        if not path.exists():
            raise BenchmarkDataError(f"bench.data_path={data_path}: no such file or directory")
        return path
    return ensure_cached(bench, cache_dir, download, local)


def is_cached(cache_dir: str) -> bool:
    return (Path(cache_dir).expanduser() / _COMPLETE).exists()


def ensure_cached(bench: str, cache_dir: str, download: Callable[[Path], None], local: str = "a local copy") -> Path:
    """`cache_dir` after a complete fill; `download(tmp_dir)` fills a fresh folder (from the
    Hugging Face cache when it holds the files, offline too) that replaces `cache_dir` only
    once it is complete."""
    target = Path(cache_dir).expanduser()
    if is_cached(cache_dir):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        download(tmp)
        (tmp / _COMPLETE).write_text("")
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    except BenchmarkDataError:
        raise
    except NotCached as e:
        raise BenchmarkDataError(f"bench={bench}: data not found offline (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE "
                                 f"is set): {e}, and bench.cache_dir={target} is empty; "
                                 f"{fix_hint(bench, local)}") from None
    except ImportError as e:
        raise BenchmarkDataError(f"bench={bench}: reading or downloading its data needs the '{e.name}' package "
                                 f"(pip install {e.name})") from None
    except Exception as e:
        first = (str(e).splitlines() or [""])[0]
        raise BenchmarkDataError(f"bench={bench}: download failed ({type(e).__name__}: {first}); "
                                 f"{fix_hint(bench, local)}") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return target


def hub_file(repo_id: str, filename: str, dest: Path, revision: str | None = None) -> Path:
    """A file of a hub dataset repository (Hugging Face cache first), copied to `dest`."""
    src = hub.file_path(repo_id, filename, revision)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest)
    return dest


def hub_rows(repo_id: str, split: str, revision: str | None = None) -> Iterator[dict]:
    """Rows of one split of a hub dataset (Hugging Face cache first)."""
    return hub.rows(hub.split_files(repo_id, split, revision))


def web_file(url: str, dest: Path) -> Path:
    """A file from a plain URL (repositories that publish their data outside the hub); offline
    it is `NotCached`, without a network attempt."""
    if offline():
        raise NotCached(url, "any local cache (nothing is downloaded offline)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with urllib.request.urlopen(url, timeout=120) as response, open(dest, "wb") as f:
        shutil.copyfileobj(response, f)
    return dest


def write_jsonl(path: Path, rows: Iterable[dict]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n


def read_rows(path: Path) -> list[SourceRow]:
    """Records of a .jsonl file (one per line) or a .json file (a list, or one object).

    A line that is not JSON is reported and skipped; a file that cannot be read at all is
    one BenchmarkDataError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise BenchmarkDataError(f"{path}: cannot read ({e.strerror or e})") from None
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise BenchmarkDataError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None
        items = data if isinstance(data, list) else [data]
        return [SourceRow(str(path), i, item) for i, item in enumerate(items)]
    rows = []
    for i, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        try:
            rows.append(SourceRow(str(path), i, json.loads(line)))
        except json.JSONDecodeError as e:
            report(SourceRow(str(path), i, None), f"not valid JSON ({e.msg})")
    return rows


def report(row: SourceRow, problem: str) -> None:
    """Log a skipped row (1-based, as editors count lines) and count it in the run's summary."""
    from memexp.benchmarks import skipped_rows

    skipped_rows.add(row.source, row.index + 1, problem)  # first: under strict_data it raises, nothing is skipped
    log.warning("%s row %d: %s (skipped)", row.source, row.index + 1, problem)


def rows_by_subset(rows: Iterable[SourceRow], subset_of: Callable[[dict], Any], known: Iterable[str],
                   field: str) -> dict[str, list[SourceRow]]:
    """A single file's rows grouped by the subset each names (`subset_of(row)`, the row's `field`).
    A row that names none, or a subset the benchmark does not have, is reported (skipped and
    counted), as a folder's malformed rows are: never dropped in silence."""
    known = set(known)
    out: dict[str, list[SourceRow]] = {}
    for row in rows:
        if not isinstance(row.data, dict):
            report(row, f"expected a JSON object, got {type(row.data).__name__}")
            continue
        name = subset_of(row.data)
        if name is None or name == "":
            report(row, f"missing field '{field}'")
        elif name not in known:
            report(row, f"{field} is not a subset of this benchmark ({name!r})")
        else:
            out.setdefault(name, []).append(row)
    return out


def row_problem(data: Any, fields: dict[str, type | tuple[type, ...]], nonempty: tuple[str, ...] = ()) -> str | None:
    """What is wrong with a record, or None: a missing field, a field of the wrong type, or
    an empty one among `nonempty`."""
    if not isinstance(data, dict):
        return f"expected a JSON object, got {type(data).__name__}"
    for name, kind in fields.items():
        if name not in data or data[name] is None:
            return f"missing field '{name}'"
        if not isinstance(data[name], kind):
            return f"field '{name}' should be {_kind_name(kind)}, got {type(data[name]).__name__}"
    for name in nonempty:
        value = data.get(name)
        if not (value.strip() if isinstance(value, str) else value):
            return f"empty field '{name}'"
    return None


def valid_rows(rows: Iterable[SourceRow], fields: dict[str, type | tuple[type, ...]],
               nonempty: tuple[str, ...] = ()) -> list[SourceRow]:
    """The well-formed rows; every other one is reported with its file and row."""
    good = []
    for row in rows:
        problem = row_problem(row.data, fields, nonempty)
        if problem is None:
            good.append(row)
        else:
            report(row, problem)
    return good


def require_rows(rows: list, bench: str, where: str) -> list:
    if not rows:
        raise BenchmarkDataError(f"bench={bench}: no usable rows in {where}")
    return rows


def _kind_name(kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)
