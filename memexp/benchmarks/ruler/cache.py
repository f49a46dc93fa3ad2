"""Disk cache of generated RULER examples.

Generated data is a pure function of its inputs, so a file is named by the hash of all
of them: task and its arguments, length, seed, generation budget, the tokenizer (by
fingerprint) and every outside source (by content hash). Files are written to a
temporary name and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Optional

from memexp.backbones.base import Tokenizer
from memexp.benchmarks.ruler.config import VERSION as FORMAT_VERSION  # generated examples change with it
from memexp.benchmarks.ruler.templates import COMMON_WORDS, FREQ_WORDS, NEEDLE, NIAH, NOISE, QA, VARIABLE_TRACKING
from memexp.core.types import Example, Question

_PROBE = "\n".join(
    [
        NIAH.full,
        VARIABLE_TRACKING.full,
        COMMON_WORDS.full,
        FREQ_WORDS.full,
        QA.full,
        NOISE,
        NEEDLE.format(type_needle_v="numbers", key="abandoned-aardvark", value="4821937"),
        "VAR QWERT = 58213 VAR ASDFG = VAR QWERT 1. zucchini 2. ... 3. qxzkpw",
        "e7a1c0de-3f4b-4d2a-9c8e-0123456789ab 0 7 42 1000000 9999999 3.14159 $3.50",
        "Dr. Smith (e.g. Viaweb) -- \"quoted\" 'single' [brackets] {braces} <tags> #hash @at 100%",
        "Café naïve façade — “smart quotes” … ünïcödé 中文字符 日本語 한국어 Ελληνικά русский 🙂🚀",
        "  two  spaces\tand tabs\t\tand\n\nblank lines\r\n  trailing  ",
    ]
)


def tokenizer_fingerprint(tokenizer: Tokenizer) -> str:
    """Identifies a tokenizer by what it does: its class, special ids, and its encoding of
    a probe text covering the templates, needles, digits, punctuation and other scripts."""
    kind = type(tokenizer)
    h = hashlib.sha256()
    h.update(f"{kind.__module__}.{kind.__qualname__}|{tokenizer.bos_id}|{tokenizer.eos_id}".encode())
    h.update(json.dumps(tokenizer.encode(_PROBE, add_bos=True)).encode())
    for line in _PROBE.splitlines():
        h.update(json.dumps(tokenizer.encode(line)).encode())
    return h.hexdigest()


def cache_key(inputs: dict[str, Any]) -> str:
    payload = json.dumps({"format": FORMAT_VERSION, **inputs}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def cache_path(cache_dir: str, task: str, length: int, key: str) -> Path:
    return Path(cache_dir) / task / f"{length}-{key[:24]}.json.gz"


def _example_from(d: dict) -> Example:
    questions = [Question(**q) for q in d.pop("questions")]
    return Example(questions=questions, **d)


def load(path: Path, key: str, num_samples: int) -> Optional[list[Example]]:
    """The first `num_samples` cached examples, or None when the file is missing, stale,
    unreadable or shorter (examples do not depend on how many are generated)."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, EOFError, ValueError):
        return None
    if data.get("key") != key or len(data.get("examples", [])) < num_samples:
        return None
    return [_example_from(d) for d in data["examples"][:num_samples]]


def save(path: Path, key: str, inputs: dict[str, Any], examples: list[Example]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"key": key, "inputs": inputs, "examples": [dataclasses.asdict(e) for e in examples]}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as raw:
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=3, mtime=0) as f:
                f.write(json.dumps(payload, default=str).encode("utf-8"))
            raw.flush()
            os.fsync(raw.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; the cache is shared like any output
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
