"""NoteBank key distinctiveness d_t = 1 - <unit key, normalised mean of the chunk's unit keys>.

`chunk_distinctiveness` runs the Triton kernel when `memexp.kernels.dispatch.use_kernels` says so (CUDA
tensors, or CPU tensors under TRITON_INTERPRET=1) and the PyTorch reference otherwise.
"""

from __future__ import annotations

import torch

from memexp.kernels.dispatch import use_kernels
from memexp.kernels.distinctiveness.reference import chunk_distinctiveness_reference


def chunk_distinctiveness(keys: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """[T, Ch] fp32 distinctiveness of one chunk's keys [T, Ch, d_k]; see the reference."""
    if use_kernels(keys, "triton"):
        from memexp.kernels.distinctiveness.triton import chunk_distinctiveness_triton

        return chunk_distinctiveness_triton(keys, eps)
    return chunk_distinctiveness_reference(keys, eps)


__all__ = ["chunk_distinctiveness", "chunk_distinctiveness_reference"]
