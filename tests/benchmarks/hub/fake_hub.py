"""A Hugging Face hub cache laid out as huggingface_hub writes it, for offline tests.

    <cache>/datasets--<org>--<name>/blobs/<sha256>
    <cache>/datasets--<org>--<name>/snapshots/<commit>/<path>   (symlinks to the blobs)
    <cache>/datasets--<org>--<name>/refs/<branch>               (the commit)
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


def add_dataset(cache: Path, repo_id: str, files: dict[str, str | bytes], commit: str | None = None,
                branch: str | None = "main") -> Path:
    """Put `files` ({repo path: content}) in the cache as one snapshot; returns the snapshot folder."""
    repo = cache / ("datasets--" + repo_id.replace("/", "--"))
    commit = commit or hashlib.sha1(json.dumps(sorted(files)).encode()).hexdigest()
    snapshot = repo / "snapshots" / commit
    for name, content in files.items():
        data = content.encode() if isinstance(content, str) else content
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    if branch is not None:
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / branch).write_text(commit)
    return snapshot


def jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def card(configs: list[dict]) -> str:
    """A dataset card whose YAML front matter declares `configs` (the hub's data_files form)."""
    import yaml

    return "---\n" + yaml.safe_dump({"configs": configs}) + "---\n# A dataset\n"
