"""Kernel tests run compiled on CUDA, and on CPU in Triton's interpreter.

The interpreter has to be on before triton is first imported (triton decorates its own
`tl.sum` & co. at import and checks the setting again at launch), and a process that imported
triton in one mode cannot switch. So the CPU cases run only when the session started with
TRITON_INTERPRET=1; a normal `pytest` run gets them from `test_interpreter.py`, which reruns
this folder in a fresh process with the variable set. Other tests' processes are left alone.
"""

import os

import pytest
import torch

IN_INTERPRETER = os.environ.get("TRITON_INTERPRET") == "1"


@pytest.fixture(params=[pytest.param("cpu", id="cpu-interpreter"), pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)])
def device(request) -> torch.device:
    """The device a kernel test runs on."""
    pytest.importorskip("triton")
    if request.param == "cuda":
        if IN_INTERPRETER:
            pytest.skip("TRITON_INTERPRET=1: kernels are interpreted, not compiled for CUDA")
        if not torch.cuda.is_available():
            pytest.skip("needs a CUDA device")
    elif not IN_INTERPRETER:
        pytest.skip("CPU kernel runs need TRITON_INTERPRET=1 at start-up; test_interpreter.py runs them")
    return torch.device(request.param)
