"""Rotary position embeddings: full or partial, with the long-context scalings the
checkpoints use (Llama-3 frequency smoothing, YaRN, linear interpolation).

Layout is the "rotate half" one (GPT-NeoX, Llama, Qwen, FLA's default): the rotated part of
a head is split into two halves that form the (real, imaginary) pairs. With a partial
rotary factor only the first `rotary_dim` channels of each head rotate; the rest pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Rope:
    """Inverse frequencies [rotary_dim / 2] and the attention scaling applied to cos/sin."""

    inv_freq: torch.Tensor
    attention_scaling: float = 1.0

    @property
    def rotary_dim(self) -> int:
        return 2 * self.inv_freq.numel()

    def to(self, device: torch.device) -> "Rope":
        return Rope(self.inv_freq.to(device), self.attention_scaling)

    def cos_sin(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [T, rotary_dim] for absolute `positions` [T], computed in fp32."""
        freqs = positions.float()[:, None] * self.inv_freq.float()[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        return (emb.cos() * self.attention_scaling).to(dtype), (emb.sin() * self.attention_scaling).to(dtype)


def build_rope(
    head_dim: int,
    theta: float,
    partial_rotary_factor: float = 1.0,
    scaling: dict | None = None,
    max_position_embeddings: int | None = None,
) -> Rope:
    """Frequencies of a checkpoint's rotary embedding.

    Args:
        head_dim: channels per attention head.
        theta: the rotary base.
        partial_rotary_factor: fraction of each head that rotates (Qwen3.5: 0.25).
        scaling: the config's `rope_scaling` / `rope_parameters` entry, e.g.
            {"rope_type": "llama3", "factor": 32, "low_freq_factor": 1, "high_freq_factor": 4,
             "original_max_position_embeddings": 8192} or
            {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 262144};
            None or rope_type 'default' for plain RoPE.
        max_position_embeddings: the config's value (YaRN's factor when none is given).
    """
    dim = int(head_dim * partial_rotary_factor)
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    kind = (scaling or {}).get("rope_type", (scaling or {}).get("type", "default"))
    if kind == "default":
        return Rope(inv_freq)
    if kind == "linear":
        return Rope(inv_freq / scaling["factor"])
    if kind == "llama3":
        return Rope(_llama3(inv_freq, scaling))
    if kind == "yarn":
        return _yarn(inv_freq, dim, theta, scaling, max_position_embeddings)
    raise ValueError(f"rope_type={kind!r}: supported are default, linear, llama3, yarn")


def _llama3(inv_freq: torch.Tensor, s: dict) -> torch.Tensor:
    """Llama 3.1+: long wavelengths divided by `factor`, short ones kept, a smooth ramp between."""
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old_len = s["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq
    smooth = ((old_len / wavelen - low) / (high - low)).clamp(0, 1)
    return (1 - smooth) * inv_freq / factor + smooth * inv_freq


def _yarn(inv_freq: torch.Tensor, dim: int, theta: float, s: dict, max_pos: int | None) -> Rope:
    """YaRN (Peng et al. 2023): interpolate the low frequencies by `factor`, keep the high
    ones, ramp linearly between the correction dims of beta_fast / beta_slow rotations, and
    scale attention by 0.1 ln(factor) + 1."""
    old_len = s["original_max_position_embeddings"]
    factor = s.get("factor") or max_pos / old_len
    beta_fast = s.get("beta_fast") or 32
    beta_slow = s.get("beta_slow") or 1
    attention_factor = s.get("attention_factor")
    if attention_factor is None:
        mscale, mscale_all_dim = s.get("mscale"), s.get("mscale_all_dim")
        if mscale and mscale_all_dim:
            attention_factor = _yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all_dim)
        else:
            attention_factor = _yarn_mscale(factor)

    def correction_dim(rotations: float) -> float:
        return dim * math.log(old_len / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if s.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    keep = 1 - ramp
    return Rope(inv_freq / factor * (1 - keep) + inv_freq * keep, float(attention_factor))


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the first `rotary_dim` channels of every head.

    Args:
        x: [B, T, H, D] queries or keys.
        cos, sin: [T, rotary_dim] from `Rope.cos_sin`, rotary_dim <= D.
    Returns:
        [B, T, H, D] in x's dtype.
    """
    r = cos.shape[-1]
    cos, sin = cos[:, None, :], sin[:, None, :]
    rot, rest = x[..., :r], x[..., r:]
    rot = rot * cos + rotate_half(rot) * sin
    return torch.cat([rot, rest], dim=-1) if rest.shape[-1] else rot


def rope_from_config(values: dict, head_dim: int, default_theta: float = 10000.0) -> Rope:
    """The rotary embedding a config.json describes, in either transformers layout:
    `rope_parameters` {rope_theta, rope_type, partial_rotary_factor, ...} (transformers 5),
    or top-level `rope_theta` + `rope_scaling` (+ `partial_rotary_factor`) (earlier ones)."""
    params = values.get("rope_parameters")
    if isinstance(params, dict):
        theta = params.get("rope_theta", values.get("rope_theta", default_theta))
        partial = params.get("partial_rotary_factor", values.get("partial_rotary_factor", 1.0))
        scaling = params
    else:
        theta = values.get("rope_theta") or default_theta
        partial = values.get("partial_rotary_factor", 1.0)
        scaling = values.get("rope_scaling")
    return build_rope(head_dim, theta, partial, scaling, values.get("max_position_embeddings"))
