"""NoteBank routing: max cosine over question positions per (channel, note), one vote per channel.

`route_votes` runs the Triton kernel when `memexp.kernels.dispatch.use_kernels` says so (CUDA tensors,
or CPU tensors under TRITON_INTERPRET=1), the tiled fp32 path of `cpu.py` for other CPU tensors,
and the PyTorch reference elsewhere.
"""

from __future__ import annotations

import torch

from memexp.kernels.dispatch import use_kernels
from memexp.kernels.routing.cpu import route_votes_cpu
from memexp.kernels.routing.reference import route_votes_reference


def route_votes(addresses: torch.Tensor, queries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """votes [N], best [Ch], scores [Ch, N]; see `route_votes_reference` for the contract."""
    if use_kernels(addresses, "triton"):
        from memexp.kernels.routing.triton import route_votes_triton

        return route_votes_triton(addresses, queries)
    if addresses.device.type == "cpu":
        return route_votes_cpu(addresses, queries)
    return route_votes_reference(addresses, queries)


__all__ = ["route_votes", "route_votes_cpu", "route_votes_reference"]
