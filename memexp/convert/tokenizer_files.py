"""Copying a tokenizer's files beside converted weights (both converters)."""

from __future__ import annotations

import shutil
from pathlib import Path

from memexp.backbones.loading import TOKENIZER_FILES


def copy_tokenizer_files(directory: Path, out: Path) -> list[str]:
    """Every tokenizer file of `directory` (memexp's TOKENIZER_FILES patterns) copied into `out`."""
    copied = []
    for pattern in TOKENIZER_FILES:
        for f in directory.glob(pattern):
            shutil.copy(f, out / f.name)
            copied.append(f.name)
    return copied
