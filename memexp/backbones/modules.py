"""Modules and initialisation shared by the architectures: RMSNorm, the short-conv weight
holder, the gated MLP and the random initialisation (recurrent decay gates included).

Each architecture names these modules as its checkpoints do, so only the module classes are
shared here, never an attribute layout.
"""

from __future__ import annotations

import math
import re
from typing import Iterable

import torch
import torch.nn.functional as F
from torch import nn

from memexp.backbones.norms import rms_norm


def fla_mlp_width(hidden: int, ratio: float | None) -> int:
    """FLA GatedMLP: 2/3 * hidden * hidden_ratio rounded up to a multiple of 256."""
    width = int(hidden * (ratio or 4) * 2 / 3)
    return 256 * ((width + 255) // 256)


def named_rows(parts: list[tuple[str, int]], **spans: tuple[str, str]) -> dict[str, tuple[int, int]]:
    """Half-open output-row ranges of a fused projection from its parts in row order, plus
    named spans (first part, last part): named_rows([("x", 4), ("B", 2)], xB=("x", "B"))
    -> {"x": (0, 4), "B": (4, 6), "xB": (0, 6)}. Adapters read these to update some parts only."""
    rows, start = {}, 0
    for name, width in parts:
        rows[name] = (start, start + width)
        start += width
    for name, (first, last) in spans.items():
        rows[name] = (rows[first][0], rows[last][1])
    return rows

class RMSNorm(nn.Module):
    """rms_norm(x) * weight over the last dim (fp32 statistics, output in x's dtype)."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


class ShortConv(nn.Module):
    """Holds a depthwise conv weight [D, 1, W] under FLA's / LitGPT's `*_conv1d.weight` name;
    the convolution itself is `memexp.kernels.short_conv`, which carries the window across chunks."""

    def __init__(self, channels: int, kernel_size: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(channels, 1, kernel_size))


class GatedMLP(nn.Module):
    """down(silu(gate x) * up x): the MLP of Llama, Qwen3.5, FLA's GatedMLP and LitGPT's LLaMAMLP
    (whose xformers names w1/w2/w3 are renamed onto gate/up/down when its checkpoint loads)."""

    def __init__(self, hidden: int, inner: int, bias: bool = False) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inner, bias=bias)
        self.up_proj = nn.Linear(hidden, inner, bias=bias)
        self.down_proj = nn.Linear(inner, hidden, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


DT_MIN, DT_MAX, DT_FLOOR = 1e-3, 0.1, 1e-4  # the step-size range every upstream recurrent layer samples


@torch.no_grad()
def random_init(
    model: nn.Module,
    seed: int,
    std: float = 0.02,
    a_min: float = 1.0,
    dt_bias: float | None = None,
    ones: Iterable[str] = (r"norm\.weight$",),
    zeros: Iterable[str] = (),
) -> None:
    """The upstream random initialisation, reproducible from `seed` whatever the global RNG holds.

    Parameters are visited in `named_parameters` order, one draw each from a generator seeded
    with `seed` (so a model's init depends only on its structure and the seed):
    - `A_log`: log of A ~ U(a_min, 16) (the decay rate per head);
    - `dt_bias`: softplus^-1 of dt, dt log-uniform in [1e-3, 0.1] floored at 1e-4 (FLA,
      NVlabs, mamba_ssm), or the constant `dt_bias` when given (transformers' Qwen3.5: 1);
    - names matching a pattern in `ones` (regex, searched) are 1, then those matching `zeros`
      and every other `bias` are 0; the rest are N(0, std).
    """
    gen = torch.Generator(device="cpu").manual_seed(seed)
    ones, zeros = [re.compile(p) for p in ones], [re.compile(p) for p in zeros]
    for name, p in model.named_parameters():
        leaf = name.rpartition(".")[2]
        if leaf == "A_log":
            p.copy_(torch.empty(p.shape).uniform_(a_min, 16, generator=gen).log())
        elif leaf == "dt_bias" and dt_bias is not None:
            p.fill_(dt_bias)
        elif leaf == "dt_bias":
            dt = torch.exp(torch.rand(p.shape, generator=gen) * (math.log(DT_MAX) - math.log(DT_MIN)) + math.log(DT_MIN))
            dt = dt.clamp(min=DT_FLOOR)
            p.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus^-1(dt)
        elif any(r.search(name) for r in ones):
            p.fill_(1.0)
        elif leaf == "bias" or any(r.search(name) for r in zeros):
            p.zero_()
        else:
            p.copy_(torch.empty(p.shape).normal_(0.0, std, generator=gen))
