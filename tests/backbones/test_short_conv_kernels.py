"""short_conv on causal-conv1d's kernels keeps the torch path's contract.

No CUDA here, so the CPU tests install a stand-in `causal_conv1d` module
(kernel_stand_ins.py) that computes what Dao-AILab's reference functions compute and enforces
the checks its C++ entry points make (layouts, strides, dtypes, widths): a call memexp would
get wrong on a GPU (channel-first input with an initial window, a window of the wrong stride
or dtype) fails here too. The `gpu` test compares the real kernels with the torch path.
"""

from __future__ import annotations

import kernel_stand_ins
import pytest
import torch
from kernel_stand_ins import on_torch

from memexp.kernels.short_conv import short_conv


@pytest.fixture
def kernel_calls(monkeypatch):
    """Routes short_conv's kernel branch to the causal-conv1d stand-in; yields the calls it served."""
    return kernel_stand_ins.install(monkeypatch, libraries=("causal_conv1d",))


def _torch_path(x, w, bias, window, activation="silu"):
    return on_torch(lambda: short_conv(x, w, bias, window=window, activation=activation))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("W", [2, 4])
def test_kernel_branch_matches_torch_path_piece_by_piece(kernel_calls, dtype, W):
    """Prefill chunks, single decode tokens and short chunks, each continuing the window
    the previous piece returned, give the torch path's outputs and windows."""
    gen = torch.Generator().manual_seed(W)
    D = 24
    x = torch.randn(2, 40, D, generator=gen).to(dtype)
    w = torch.randn(D, 1, W, generator=gen)
    bias = torch.randn(D, generator=gen)
    win_k = win_t = None
    for a, b in [(0, 9), (9, 10), (10, 11), (11, 13), (13, 40)]:
        passed = win_k
        given = None if passed is None else passed.clone()
        y_k, win_k = short_conv(x[:, a:b], w, bias, window=passed)
        y_t, win_t = _torch_path(x[:, a:b], w, bias, win_t)
        assert y_k.shape == y_t.shape and y_k.dtype == dtype and win_k.shape == (2, D, W - 1)
        tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=2e-2, rtol=2e-2)
        torch.testing.assert_close(y_k, y_t, **tol)
        torch.testing.assert_close(win_k, win_t, **tol)
        assert win_k.is_contiguous()
        if passed is not None:
            assert torch.equal(passed, given), "the kernel wrote the caller's window"
            assert torch.equal(given, x[:, a - (W - 1):a].transpose(1, 2))
    assert kernel_calls.count("update:1") == 2 and "fn:9" in kernel_calls and "fn:27" in kernel_calls
    assert ("fn:2" in kernel_calls) == (W == 2), "a 2-token chunk runs the prefill kernel only when W = 2"


def test_shapes_the_kernels_reject_take_the_torch_path(kernel_calls):
    """A channel count that is not a multiple of 8, a width of 5 and float64 stay on torch."""
    short_conv(torch.randn(1, 12, 6), torch.randn(6, 4), None)
    short_conv(torch.randn(1, 12, 8), torch.randn(8, 5), None)
    short_conv(torch.randn(1, 12, 8, dtype=torch.float64), torch.randn(8, 4, dtype=torch.float64), None)
    assert kernel_calls == []
    short_conv(torch.randn(1, 12, 8), torch.randn(8, 4), None)
    assert kernel_calls == ["fn:12"]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_real_causal_conv1d_matches_torch_path(dtype):
    pytest.importorskip("causal_conv1d")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    gen = torch.Generator(device="cuda").manual_seed(0)
    D, W = 4352, 4  # mamba2-1.3b's xBC conv
    x = torch.randn(1, 300, D, device="cuda", generator=gen).to(dtype)
    w = torch.randn(D, 1, W, device="cuda", generator=gen).to(dtype)
    bias = torch.randn(D, device="cuda", generator=gen).to(dtype)
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == torch.float32 else dict(atol=3e-2, rtol=3e-2)
    win_k = win_t = None
    for a, b in [(0, 128), (128, 129), (129, 131), (131, 300)]:
        y_k, win_k = short_conv(x[:, a:b], w, bias, window=win_k)
        y_t, win_t = _torch_path(x[:, a:b], w, bias, win_t)
        torch.testing.assert_close(y_k, y_t, **tol)
        torch.testing.assert_close(win_k, win_t, **tol)
