"""Triton kernels for NoteBank's per-channel key distinctiveness (NoteBank paper, Eq. 3); same
contract as `chunk_distinctiveness_reference`.

Two launches over (channel, block of tokens): `_unit_key_sums_kernel` writes each block's sum of
unit keys, `_distinctiveness_kernel` adds those partial sums in a fixed order (deterministic,
no atomics), normalises the mean and scores its block. Keys are upcast to fp32 on load.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _unit_key_sums_kernel(
    k_ptr, part_ptr,
    T, D,
    stride_kt, stride_kc, stride_kd,
    stride_pc, stride_pb,
    EPS: tl.constexpr,
    BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
):
    c = tl.program_id(0)
    b = tl.program_id(1)
    offs_t = b * BLOCK_T + tl.arange(0, BLOCK_T)
    offs_d = tl.arange(0, BLOCK_D)
    mask_d = offs_d < D
    k = tl.load(k_ptr + offs_t[:, None] * stride_kt + c * stride_kc + offs_d[None, :] * stride_kd,
                mask=(offs_t < T)[:, None] & mask_d[None, :], other=0.0).to(tl.float32)
    k = k / tl.maximum(tl.sqrt(tl.sum(k * k, axis=1)), EPS)[:, None]
    tl.store(part_ptr + c * stride_pc + b * stride_pb + offs_d, tl.sum(k, axis=0), mask=mask_d)


@triton.jit
def _distinctiveness_kernel(
    k_ptr, part_ptr, out_ptr,
    T, D, NUM_BLOCKS,
    stride_kt, stride_kc, stride_kd,
    stride_pc, stride_pb,
    stride_ot, stride_oc,
    EPS: tl.constexpr,
    BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
):
    c = tl.program_id(0)
    b = tl.program_id(1)
    offs_d = tl.arange(0, BLOCK_D)
    mask_d = offs_d < D

    total = tl.zeros([BLOCK_D], tl.float32)
    for i in range(0, NUM_BLOCKS):
        total += tl.load(part_ptr + c * stride_pc + i * stride_pb + offs_d, mask=mask_d, other=0.0)
    mu = total / T
    mu = mu / tl.maximum(tl.sqrt(tl.sum(mu * mu, axis=0)), EPS)

    offs_t = b * BLOCK_T + tl.arange(0, BLOCK_T)
    mask_t = offs_t < T
    k = tl.load(k_ptr + offs_t[:, None] * stride_kt + c * stride_kc + offs_d[None, :] * stride_kd,
                mask=mask_t[:, None] & mask_d[None, :], other=0.0).to(tl.float32)
    k = k / tl.maximum(tl.sqrt(tl.sum(k * k, axis=1)), EPS)[:, None]
    d = 1.0 - tl.sum(k * mu[None, :], axis=1)
    tl.store(out_ptr + offs_t * stride_ot + c * stride_oc, d, mask=mask_t)


def chunk_distinctiveness_triton(keys: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Kernel version of `chunk_distinctiveness_reference`.

    Args:
        keys: [T, Ch, d_k] one chunk's native keys (any float dtype, any strides), T >= 1.
    Returns:
        [T, Ch] fp32: 1 - <k_hat_t, normalise(mean_t k_hat_t)>.
    """
    t, ch, d = keys.shape
    if t == 0:
        raise ValueError("distinctiveness needs at least one token")
    block_d = triton.next_power_of_2(d)
    block_t = max(16, min(64, 4096 // block_d))
    num_blocks = triton.cdiv(t, block_t)
    partial = torch.empty(ch, num_blocks, d, device=keys.device, dtype=torch.float32)
    out = torch.empty(t, ch, device=keys.device, dtype=torch.float32)
    grid = (ch, num_blocks)
    _unit_key_sums_kernel[grid](
        keys, partial, t, d, *keys.stride(), partial.stride(0), partial.stride(1),
        EPS=eps, BLOCK_T=block_t, BLOCK_D=block_d,
    )
    _distinctiveness_kernel[grid](
        keys, partial, out, t, d, num_blocks, *keys.stride(), partial.stride(0), partial.stride(1), *out.stride(),
        EPS=eps, BLOCK_T=block_t, BLOCK_D=block_d,
    )
    return out
