"""The attention layer InfLLM installs in place of a Llama `DecoderLayer`: the same norms,
projections and MLP (the same parameters, under the same names), with attention read from the
layer's `ContextMemory` instead of a KV cache. Positions come from InfLLM's own RoPE inside the
memory, not from the backbone's (the official patch.py replaces the model's rotary embedding)."""

from __future__ import annotations

import torch
from torch import nn

from memexp.backbones.stack import Layer, LayerContext, StateSpec
from memexp.methods.infllm.context_memory import ContextMemory, Settings


class InfLLMLayer(Layer):
    def __init__(self, base: nn.Module, settings: Settings) -> None:
        super().__init__()
        self.input_layernorm = base.input_layernorm
        self.self_attn = base.self_attn
        self.post_attention_layernorm = base.post_attention_layernorm
        self.mlp = base.mlp
        self.settings = settings

    def init_state(self, spec: StateSpec) -> ContextMemory:
        c = self.self_attn.c
        return ContextMemory(self.settings, spec.batch, c.num_attention_heads, c.kv_heads, c.dim_per_head, spec.dtype,
                             spec.device)

    def forward(self, x: torch.Tensor, state: ContextMemory, ctx: LayerContext) -> tuple[torch.Tensor, ContextMemory]:
        attn = self.self_attn
        c = attn.c
        B, T, hd = x.shape[0], x.shape[1], c.dim_per_head
        h = self.input_layernorm(x)
        q = attn.q_proj(h).view(B, T, c.num_attention_heads, hd).transpose(1, 2)
        k = attn.k_proj(h).view(B, T, c.kv_heads, hd).transpose(1, 2)
        v = attn.v_proj(h).view(B, T, c.kv_heads, hd).transpose(1, 2)
        o = state.append(q, k, v).transpose(1, 2).reshape(B, T, -1)
        x = x + attn.o_proj(o)
        return x + self.mlp(self.post_attention_layernorm(x)), state
