"""Run memexp in a subprocess, offline and single-threaded, importing THIS checkout's memexp
(PYTHONPATH), whatever copy is installed."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
       "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
# a few-second run on the tiny random GDN: 3 RULER examples of 512 tokens
TINY = ["backbone=tiny_gdn_random", "method=plain", "bench=ruler", "bench.tasks=[niah_single_1]",
        "bench.lengths=[512]", "bench.max_new_tokens=4", "bench.num_samples=3", "progress=false"]


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "memexp", *args]


def memexp(*args: str, cwd: Path | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(command(*args), cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout)


def popen(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(command(*args), env=ENV, **kw)


def error_lines(stderr: str) -> list[str]:
    """stderr without the runner's progress lines."""
    return [line for line in stderr.splitlines() if line.strip() and not line.startswith("[memexp] run folder")]
