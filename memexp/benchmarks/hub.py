"""Hugging Face hub datasets through the local hub cache first, as `huggingface_hub` keeps it.

A hub file or split is looked up in the hub cache (`HF_HUB_CACHE`, default `$HF_HOME/hub`:
`datasets--<org>--<name>/snapshots/<revision>/...`) before any network call. Offline
(`HF_HUB_OFFLINE=1` or `HF_DATASETS_OFFLINE=1`, "cache only" as in huggingface_hub) a miss is
`NotCached`; online the file or the split's files are downloaded into that cache, so
`python -m memexp data` on a connected machine is all a later offline run needs.

A split's files are those the dataset card's `configs:` list for it (first config, or the
one marked `default`), else the hub's naming convention: `<split>-00000-of-00001.parquet`,
`<split>.jsonl`, or files under a `<split>/` folder. Rows are read from .parquet (pyarrow),
.jsonl and .json files without the `datasets` package.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Iterator

import yaml

DATA_SUFFIXES = (".parquet", ".jsonl", ".json")


class NotCached(FileNotFoundError):
    """Offline, and a hub file or split (or a URL) is in no local cache; `what` names it."""

    def __init__(self, what: str, where: str | None = None) -> None:
        super().__init__(f"{what} is not in {where or f'the Hugging Face cache ({cache_dir()})'}")
        self.what = what


def offline() -> bool:
    """The hub may not be reached: HF_HUB_OFFLINE or HF_DATASETS_OFFLINE, read at call time
    (huggingface_hub reads its own flag once, at import)."""
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes", "on")
               for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def cache_dir() -> str:
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def _describe(repo_id: str, revision: str | None, item: str) -> str:
    at = f" at revision {revision}" if revision else ""
    return f"hub dataset {repo_id}{at} ({item})"


def file_path(repo_id: str, filename: str, revision: str | None = None) -> Path:
    """Local path of one file of a hub dataset repository: from the hub cache, else
    (online) downloaded into it."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.utils import LocalEntryNotFoundError

    try:
        return Path(hf_hub_download(repo_id, filename, repo_type="dataset", revision=revision,
                                    local_files_only=True))
    except LocalEntryNotFoundError:
        if offline():
            raise NotCached(_describe(repo_id, revision, f"file {filename}")) from None
    return Path(hf_hub_download(repo_id, filename, repo_type="dataset", revision=revision))


def split_files(repo_id: str, split: str, revision: str | None = None) -> list[Path]:
    """The data files of one split of a hub dataset, from the hub cache, else (online)
    downloaded into it."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.utils import LocalEntryNotFoundError

    try:
        snapshot = snapshot_download(repo_id, repo_type="dataset", revision=revision, local_files_only=True)
        files = files_of_split(Path(snapshot), split)
    except LocalEntryNotFoundError:
        files = []
    if files:
        return files
    if offline():
        raise NotCached(_describe(repo_id, revision, f"split {split}"))
    # the card first: it may name the split's files anywhere; else the naming convention's
    card = snapshot_download(repo_id, repo_type="dataset", revision=revision, allow_patterns=["README.md"])
    patterns = _card_patterns(Path(card), split) or [f"*{split}-*", f"*{split}.*", f"*{split}/*"]
    snapshot = snapshot_download(repo_id, repo_type="dataset", revision=revision, allow_patterns=patterns)
    files = files_of_split(Path(snapshot), split)
    if not files:
        raise FileNotFoundError(f"{_describe(repo_id, revision, f'split {split}')} has no data files")
    return files


def rows(files: list[Path]) -> Iterator[dict]:
    """The records of a split's files, in file order."""
    for path in files:
        if path.suffix == ".parquet":
            try:
                import pyarrow.parquet as pq
            except ImportError:
                raise ImportError(f"reading {path.name} needs pyarrow", name="pyarrow") from None
            yield from pq.read_table(path).to_pylist()
        elif path.suffix == ".jsonl":
            with open(path, encoding="utf-8") as f:
                yield from (json.loads(line) for line in f if line.strip())
        else:
            data = json.loads(path.read_text(encoding="utf-8"))
            yield from data if isinstance(data, list) else [data]


def files_of_split(snapshot: Path, split: str) -> list[Path]:
    """A split's data files in a local snapshot: the card's `configs:` entry, else the naming convention."""
    declared = _card_patterns(snapshot, split)
    if declared is not None:
        found = {p for pattern in declared for p in snapshot.glob(pattern) if p.is_file()}
        return sorted(found, key=lambda p: p.relative_to(snapshot).as_posix())
    name = re.compile(rf"{re.escape(split)}([-.].*)?")
    found = [p for p in snapshot.rglob("*") if p.is_file() and p.suffix in DATA_SUFFIXES
             and (name.fullmatch(p.stem) or p.parent.name == split)]
    return sorted(found, key=lambda p: p.relative_to(snapshot).as_posix())


def _card_patterns(snapshot: Path, split: str) -> list[str] | None:
    """The path patterns the dataset card's default config gives `split`; None when the card
    declares no configs."""
    card = snapshot / "README.md"
    if not card.is_file():
        return None
    text = card.read_text(encoding="utf-8")
    match = re.match(r"---\s*\n(.*?)\n---", text, re.S)
    try:
        meta = yaml.safe_load(match.group(1)) if match else None
    except yaml.YAMLError:
        return None
    configs = meta.get("configs") if isinstance(meta, dict) else None
    if not isinstance(configs, list) or not configs:
        return None
    config = next((c for c in configs if isinstance(c, dict) and c.get("default")), configs[0])
    data_files = config.get("data_files") if isinstance(config, dict) else None
    if isinstance(data_files, (str, list)) and all(isinstance(d, str) for d in _as_list(data_files)):
        return _as_list(data_files) if split == "train" else []  # bare patterns are the train split
    entries = data_files if isinstance(data_files, list) else []
    return [p for d in entries if isinstance(d, dict) and d.get("split") == split for p in _as_list(d.get("path"))]


def _as_list(value) -> list:
    return value if isinstance(value, list) else [] if value is None else [value]
