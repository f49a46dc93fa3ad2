"""short_conv on causal-conv1d's kernels keeps the torch path's contract.

No CUDA here, so the CPU tests install a stand-in `causal_conv1d` module that computes what
Dao-AILab's reference functions compute and enforces the checks its C++ entry points make
(layouts, strides, dtypes, widths): a call memexp would get wrong on a GPU (channel-first
input with an initial window, a window of the wrong stride or dtype) fails here too. The
`gpu` test compares the real kernels with the torch path.
"""

from __future__ import annotations

import importlib
import sys
import types

import pytest
import torch
import torch.nn.functional as F

from memexp import dispatch
from memexp.backbones.ops import short_conv

short_conv_module = importlib.import_module("memexp.backbones.ops.short_conv")


def _conv_ref(x, weight, bias, initial, activation):
    """Upstream's reference: x [B, D, L] (with the initial window prepended) in the weight dtype."""
    xw = x.to(weight.dtype)
    if initial is None:
        out = F.conv1d(xw, weight.unsqueeze(1), bias, padding=weight.shape[1] - 1, groups=weight.shape[0])
    else:
        xw = torch.cat([initial.to(weight.dtype), xw], dim=-1)
        out = F.conv1d(xw, weight.unsqueeze(1), bias, groups=weight.shape[0])
    out = out[..., :x.shape[-1]]
    return (F.silu(out) if activation in ("silu", "swish") else out).to(x.dtype), xw


def _fake_causal_conv1d(calls: list[str]) -> types.ModuleType:
    def causal_conv1d_fn(x, weight, bias=None, seq_idx=None, initial_states=None, return_final_states=False,
                         final_states_out=None, activation=None):
        assert activation in (None, "silu", "swish")
        B, D, L = x.shape
        W = weight.shape[-1]
        assert weight.shape == (D, W) and 2 <= W <= 4
        assert x.stride(2) == 1 or x.stride(1) == 1
        channel_last = x.stride(1) == 1 and x.stride(2) > 1
        if channel_last:
            assert D % 8 == 0 and x.stride(2) % 8 == 0 and x.stride(0) % 8 == 0
        if bias is not None:
            assert bias.dtype == weight.dtype and bias.shape == (D,) and bias.stride(-1) == 1
        if initial_states is not None:
            assert channel_last, "initial_states is only supported for channel last layout"
            assert initial_states.dtype == x.dtype and initial_states.shape == (B, D, W - 1)
            assert initial_states.stride(1) == 1
        if return_final_states:
            assert x.stride(1) == 1, "Only channel-last layout support returning final_states_out"
        calls.append(f"fn:{L}")
        out, xw = _conv_ref(x, weight, bias, initial_states, activation)
        result = torch.empty_like(x).copy_(out)
        if not return_final_states:
            return result
        final = torch.empty(B, W - 1, D, dtype=x.dtype).transpose(1, 2)
        final.copy_(xw[..., -(W - 1):])
        return result, final

    def causal_conv1d_update(x, conv_state, weight, bias=None, activation=None, cache_seqlens=None):
        assert activation in (None, "silu", "swish") and cache_seqlens is None
        squeeze = x.dim() == 2
        x3 = x.unsqueeze(-1) if squeeze else x
        B, D, L = x3.shape
        W = weight.shape[-1]
        assert conv_state.dtype == x.dtype and conv_state.shape[:2] == (B, D) and conv_state.shape[2] >= W - 1
        assert weight.shape == (D, W) and 2 <= W <= 4
        if bias is not None:
            assert bias.dtype == weight.dtype
        calls.append(f"update:{L}")
        joined = torch.cat([conv_state, x3], dim=-1).to(weight.dtype)
        conv_state.copy_(joined[..., -conv_state.shape[2]:].to(conv_state.dtype))
        out = F.conv1d(joined, weight.unsqueeze(1), bias, groups=D)[..., -L:]
        out = (F.silu(out) if activation in ("silu", "swish") else out).to(x.dtype)
        return out.squeeze(-1) if squeeze else out

    module = types.ModuleType("causal_conv1d")
    module.causal_conv1d_fn = causal_conv1d_fn
    module.causal_conv1d_update = causal_conv1d_update
    return module


@pytest.fixture
def kernel_calls(monkeypatch):
    """Routes short_conv's kernel branch to the stand-in on CPU; yields the calls it served."""
    calls: list[str] = []
    monkeypatch.setitem(sys.modules, "causal_conv1d", _fake_causal_conv1d(calls))
    monkeypatch.setattr(short_conv_module, "use_kernels", lambda x, library, required=True: (
        library == "causal_conv1d" and dispatch.kernels_mode() != "torch"))
    return calls


def _torch_path(x, w, bias, window, activation="silu"):
    previous = dispatch.kernels_mode()
    dispatch.set_kernels("torch")
    try:
        return short_conv(x, w, bias, window=window, activation=activation)
    finally:
        dispatch.set_kernels(previous)


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


def test_mamba2_decodes_the_same_on_the_kernel_branch(kernel_calls):
    """A tiny Mamba-2 (xBC conv of 96 channels) prefilled in pieces and decoded token by
    token gives the same logits with the conv on the kernel branch as on torch."""
    from memexp.backbones.mamba2 import build
    from memexp.config import BackboneConfig

    backbone = build(BackboneConfig(name="m", arch="mamba2", device="cpu", tokenizer="byte", prefill_chunk=16,
                                    model=dict(hidden_size=32, num_hidden_layers=2, num_heads=4, head_dim=16,
                                               state_size=8, n_groups=2, vocab_size=300, chunk_size=8)))
    ids = torch.randint(0, 300, (45,), generator=torch.Generator().manual_seed(1))

    def run():
        state, out = backbone.init_state(), []
        for a, b in [(0, 20), (20, 37)] + [(t, t + 1) for t in range(37, 45)]:
            out.append(backbone.forward(state, ids[a:b]))
        return torch.stack(out)

    on_kernels = run()
    assert any(c.startswith("fn:") for c in kernel_calls) and "update:1" in kernel_calls
    kernel_calls.clear()
    previous = dispatch.kernels_mode()
    dispatch.set_kernels("torch")
    try:
        on_torch = run()
    finally:
        dispatch.set_kernels(previous)
    assert kernel_calls == []
    torch.testing.assert_close(on_kernels, on_torch, atol=1e-5, rtol=1e-5)


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
