"""Attention-only Transformers: Llama-3.2 and FLA's Transformer baseline."""

from memexp.core.registry import ARCHS

ARCHS.register("llama", "memexp.backbones.attention.model:build",
               schema="memexp.backbones.attention.model:AttentionConfig", recurrent_channels=False, adapters=True,
               layer_replacement=True, llama_layers=True, softmax_attention=True,
               costs="memexp.backbones.attention.costs:cost_shapes")
