"""Files written whole or not at all: what a resume reads is never half-written."""

from __future__ import annotations

import os
from pathlib import Path


def atomic_write(path: Path, text: str | bytes) -> None:
    """Write `text` to `path` through a synced temporary file; on failure (a full disk) the
    temporary file is removed, so no half-written file is left for a resume to read."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(text.encode() if isinstance(text, str) else text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
