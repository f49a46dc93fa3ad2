"""Run an `experiment=` preset through `python -m memexp run` in a subprocess, offline and
single-threaded, as a user would."""

import json
import os
import subprocess
import sys
from pathlib import Path

OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}


def run_preset(out: Path, preset: str, method: str, *overrides: str) -> Path:
    """The run folder of one job of `preset` under `out`; fails the test with memexp's stderr."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "memexp", "run", f"experiment={preset}", f"method={method}", "logger=none",
           f"output_dir={out}", f"bench.cache_dir={out / 'cache'}", "progress=false", *overrides]
    result = subprocess.run(cmd, cwd=out, env={**os.environ, **OFFLINE}, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    (folder,) = (out / "ruler").glob("*/*/*/")
    return folder


def summary(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text())


def records(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]
