"""Run `python -m memexp run` in a subprocess, offline and single-threaded, as a user would,
on the tiny random backbone with the plain method."""

import json
import os
import subprocess
import sys
from pathlib import Path

OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
# the checkout under test, not whichever memexp is installed (the run's cwd is a temporary folder)
REPO = str(Path(__file__).resolve().parents[2])


def memexp_run(workdir: Path, *overrides: str) -> dict:
    """The run's summary.json; fails the test with memexp's stderr when the run fails."""
    out = workdir / "runs"
    cmd = [sys.executable, "-m", "memexp", "run", "backbone=tiny_gdn_random", "method=plain", "logger=none",
           f"output_dir={out}", "progress=false", *overrides]
    path = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)
    result = subprocess.run(cmd, cwd=workdir, env={**os.environ, **OFFLINE, "PYTHONPATH": path}, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    (summary,) = out.glob("*/*/*/*/summary.json")
    return json.loads(summary.read_text())
