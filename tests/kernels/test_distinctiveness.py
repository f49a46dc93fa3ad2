"""The distinctiveness kernel equals `chunk_distinctiveness_reference`."""

import sys
import types

import pytest
import torch

from memexp.kernels import dispatch
from memexp.kernels.distinctiveness import chunk_distinctiveness
from memexp.kernels.distinctiveness.reference import chunk_distinctiveness_reference


def check(keys: torch.Tensor) -> torch.Tensor:
    from memexp.kernels.distinctiveness.triton import chunk_distinctiveness_triton

    out = chunk_distinctiveness_triton(keys).cpu()
    ref = chunk_distinctiveness_reference(keys.cpu())
    assert out.dtype == torch.float32 and out.shape == ref.shape == keys.shape[:2]
    err = (out - ref).pow(2).mean().sqrt()
    assert err <= 1e-5 * ref.pow(2).mean().sqrt() + 1e-6  # relative RMS; absolute where the scores are ~0
    return out


SHAPES = [  # (tokens, channels, d_k, dtype)
    (1, 3, 16, torch.float32),  # one token: its own mean, distinctiveness 0
    (37, 2, 256, torch.bfloat16),  # tokens not a multiple of the block, d_k 256
    (544, 3, 32, torch.bfloat16),  # a write chunk C = 512 plus the 32-token tail: nine partial sums
    (70, 2, 10, torch.float32),  # d_k not a power of two
]


@pytest.mark.parametrize("t,ch,d,dtype", SHAPES)
def test_kernel_equals_reference(device, t, ch, d, dtype):
    g = torch.Generator().manual_seed(t + d)
    keys = (torch.randn(t, ch, d, generator=g) + 0.3).to(device=device, dtype=dtype)
    check(keys)


def test_strided_keys_and_zero_key(device):
    """Keys read through strides (every other channel of a layer); a zero key scores 1."""
    g = torch.Generator().manual_seed(3)
    layer = torch.randn(50, 8, 16, generator=g).to(device)
    layer[5, 2] = 0.0
    keys = layer[:, ::2]
    assert not keys.is_contiguous()
    out = check(keys)
    assert out[5, 1].item() == pytest.approx(1.0)


def test_dispatch_uses_the_kernel_only_when_allowed(monkeypatch):
    calls = []
    fake = types.ModuleType("memexp.kernels.distinctiveness.triton")
    fake.chunk_distinctiveness_triton = lambda k, eps: calls.append(eps) or chunk_distinctiveness_reference(k, eps)
    monkeypatch.setitem(sys.modules, "memexp.kernels.distinctiveness.triton", fake)
    monkeypatch.setattr(dispatch, "has_module", lambda name: True)
    monkeypatch.setattr(dispatch, "_mode", "auto")
    keys = torch.randn(4, 2, 8)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    chunk_distinctiveness(keys)
    assert calls == []
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert torch.equal(chunk_distinctiveness(keys, eps=1e-5), chunk_distinctiveness_reference(keys, 1e-5))
    assert calls == [1e-5]
