"""The SHA-256 of every byte of a file, read once: the digest of a large file is cached.

A checkpoint is identified by all of its bytes (fine-tuning one layer changes a few MiB of a
multi-GB file, which no sample of blocks reliably sees), and reading gigabytes on every run is
what a cache avoids. An entry is keyed by what changes when the file may have changed: its
resolved path, size, mtime_ns, ctime_ns and inode (ctime too, because `cp -p` or `touch -r`
can restore an old mtime over new bytes, and the kernel sets ctime on every such change).

A file written in the same moment it is hashed could change again without moving its
timestamps, which only tick every few milliseconds on common file systems (git's "racy clean"
case); its digest is therefore cached only when its mtime or its ctime is older than
`SETTLED_NS` at the time the reading began (a later write sets both to the present, so the old
one moves), and hashed afresh until then.

The cache is a folder beside the Hugging Face cache (`$HF_HOME/../memexp/fingerprints`, by
default ~/.cache/memexp/fingerprints), one small JSON file per entry; a cache that cannot be
read or written costs only time, never a result.

A file's, folder's or checkpoint's fingerprint (the run identity's and a read adapter's) is built
from these digests below.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

CACHED_FROM_BYTES = 16 * 2**20  # smaller files are hashed on every run (milliseconds)
SETTLED_NS = 2 * 10**9
BLOCK = 8 * 2**20


def cache_dir() -> Path:
    """The fingerprint cache: beside the Hugging Face cache folder ($HF_HOME, else
    $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface)."""
    hf_home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache"), "huggingface")
    return Path(hf_home).expanduser().resolve().parent / "memexp" / "fingerprints"


def _entry_key(path: Path, st: os.stat_result) -> dict:
    return {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
            "inode": st.st_ino, "device": st.st_dev}


def _entry_path(key: dict) -> Path:
    name = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]
    return cache_dir() / f"{name}.json"


def _stream_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(BLOCK), b""):
            h.update(block)
    return h.hexdigest()


def file_sha256(path: Path) -> str:
    """The SHA-256 hex digest of all of `path`'s bytes (cached for files of `CACHED_FROM_BYTES`
    and more; see the module docstring)."""
    path = Path(path).expanduser().resolve()
    st = path.stat()
    if st.st_size < CACHED_FROM_BYTES:
        return _stream_sha256(path)
    key = _entry_key(path, st)
    entry = _entry_path(key)
    try:
        cached = json.loads(entry.read_text())
        if cached.get("key") == key and isinstance(cached.get("sha256"), str):
            return cached["sha256"]
    except (OSError, ValueError):
        pass  # no entry yet (or an unreadable one): hash
    began = time.time_ns()
    digest = _stream_sha256(path)
    after = path.stat()
    settled = min(st.st_mtime_ns, st.st_ctime_ns) < began - SETTLED_NS
    if settled and _entry_key(path, after) == key:  # unchanged while it was read, and not racy
        _store(entry, {"key": key, "sha256": digest})
    return digest


def _store(entry: Path, value: dict) -> None:
    from memexp.core.atomic import atomic_write

    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(entry, json.dumps(value) + "\n")
    except OSError:
        pass  # a read-only or full home: the next run hashes again


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf")


def file_fingerprint(path: Path) -> dict[str, Any]:
    """{"size", "sha256"} of one file, every byte of it (memexp.core.file_digest caches large ones)."""
    return {"size": path.stat().st_size, "sha256": file_sha256(path)}


def path_fingerprint(path: Path) -> dict[str, Any]:
    """A file's fingerprint, or a directory's: its files (hidden ones left out: caches, markers) by
    relative name, sorted, so the same content anywhere gives the same fingerprint."""
    path = path.expanduser()
    if path.is_file():
        return {"file": path.name, **file_fingerprint(path)}
    return {"dir": {str(p.relative_to(path)): file_fingerprint(p) for p in _visible_files(path)}}


def _visible_files(root: Path) -> list[Path]:
    """The files under `root`, sorted, hidden ones (and those in hidden folders) left out."""
    return sorted(p for p in root.rglob("*") if p.is_file() and not any(
        part.startswith(".") for part in p.relative_to(root).parts))


def weights_fingerprint(pretrained: str | None) -> str | None:
    """One hash of a local checkpoint's weight files (by relative name and `file_fingerprint`;
    config and tokenizer files left out), or None for a hub id or a random init. Read adapters
    record it: the same shape with other weights is another model (memexp.methods.read_adapter)."""
    if not pretrained or not Path(pretrained).expanduser().is_dir():
        return None
    root = Path(pretrained).expanduser()
    files = [p for p in _visible_files(root) if p.suffix in WEIGHT_SUFFIXES]
    if not files:
        return None
    prints = {str(p.relative_to(root)): file_fingerprint(p) for p in files}
    return hashlib.sha256(json.dumps(prints, sort_keys=True).encode()).hexdigest()[:16]
