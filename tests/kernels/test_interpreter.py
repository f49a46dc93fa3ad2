"""The CPU kernel tests of this folder, in a fresh process under Triton's interpreter."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def test_kernel_tests_pass_in_the_interpreter():
    """Runs every `cpu-interpreter` case of tests/kernels with TRITON_INTERPRET=1 set before
    triton is imported; all must pass (none skipped)."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("this session is already in the interpreter: the cases run directly")
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    cmd = [sys.executable, "-m", "pytest", str(HERE), "-q", "-p", "no:cacheprovider", "-k", "cpu-interpreter"]
    result = subprocess.run(cmd, cwd=HERE.parents[1], env=env, capture_output=True, text=True, timeout=800)
    tail = result.stdout[-4000:] + result.stderr[-2000:]
    assert result.returncode == 0, tail
    summary = result.stdout.strip().splitlines()[-1]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= 12 and "skipped" not in summary, tail
