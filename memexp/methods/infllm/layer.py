"""The attention layers InfLLM installs in place of a backbone's softmax attention layers: the
same norms, projections and MLP (the same parameters, under the same names), with attention read
from the layer's `ContextMemory` instead of a KV cache. Positions come from InfLLM's own RoPE
inside the memory, not from the backbone's (the official patch.py replaces the model's rotary
embedding with its own).

- `InfLLMLayer`: a Llama `DecoderLayer` (memexp.backbones.attention.model);
- `GatedInfLLMLayer`: a Qwen3.5 full-attention `DecoderLayer` (memexp.backbones.hybrid.model):
  q/k norms before the memory, the output gate after it, RoPE on its rotary part only.
"""

from __future__ import annotations

import torch
from torch import nn

from memexp.backbones.stack import Layer, LayerContext, StateSpec
from memexp.methods.infllm.context_memory import ContextMemory, Settings


class InfLLMLayer(Layer):
    KEPT = ("input_layernorm", "self_attn", "post_attention_layernorm", "mlp")  # the base layer's modules

    def __init__(self, base: nn.Module, settings: Settings) -> None:
        super().__init__()
        for name in self.KEPT:  # under their own names: the checkpoint's tensor names stay valid
            setattr(self, name, getattr(base, name))
        self.settings = settings

    @property
    def heads(self) -> tuple[int, int, int]:
        """(query heads, KV heads, head width)."""
        c = self.self_attn.c
        return c.num_attention_heads, c.kv_heads, c.dim_per_head

    def init_state(self, spec: StateSpec) -> ContextMemory:
        return ContextMemory(self.settings, spec.batch, *self.heads, spec.dtype, spec.device)

    def project(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """q [B, H, T, D], k and v [B, Hkv, T, D] before RoPE, and what `output` needs besides o."""
        attn = self.self_attn
        (B, T), (H, Hkv, hd) = h.shape[:2], self.heads
        q = attn.q_proj(h).view(B, T, H, hd).transpose(1, 2)
        k = attn.k_proj(h).view(B, T, Hkv, hd).transpose(1, 2)
        v = attn.v_proj(h).view(B, T, Hkv, hd).transpose(1, 2)
        return q, k, v, None

    def output(self, o: torch.Tensor, extra: torch.Tensor | None) -> torch.Tensor:
        """o [B, T, H * D] -> the attention's contribution to the residual [B, T, hidden]."""
        return self.self_attn.o_proj(o)

    def forward(self, x: torch.Tensor, state: ContextMemory, ctx: LayerContext) -> tuple[torch.Tensor, ContextMemory]:
        B, T = x.shape[:2]
        q, k, v, extra = self.project(self.input_layernorm(x))
        o = state.append(q, k, v).transpose(1, 2).reshape(B, T, -1)
        x = x + self.output(o, extra)
        return x + self.mlp(self.post_attention_layernorm(x)), state


class GatedInfLLMLayer(InfLLMLayer):
    @property
    def heads(self) -> tuple[int, int, int]:
        c = self.self_attn.c
        return c.num_attention_heads, c.num_key_value_heads, c.head_dim

    def project(self, h: torch.Tensor):
        attn = self.self_attn
        (B, T), (H, Hkv, hd) = h.shape[:2], self.heads
        q, gate = attn.q_proj(h).view(B, T, H, 2 * hd).chunk(2, dim=-1)
        q = attn.q_norm(q).transpose(1, 2)
        k = attn.k_norm(attn.k_proj(h).view(B, T, Hkv, hd)).transpose(1, 2)
        v = attn.v_proj(h).view(B, T, Hkv, hd).transpose(1, 2)
        return q, k, v, gate.reshape(B, T, H * hd)

    def output(self, o: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        return self.self_attn.o_proj(o * torch.sigmoid(gate))
