"""The Qwen3.5 hybrid: Gated DeltaNet layers interleaved with gated attention."""

from memexp.core.registry import ARCHS

ARCHS.register("qwen35", "memexp.backbones.hybrid.model:build", schema="memexp.backbones.hybrid.model:HybridConfig",
               recurrent_channels=True, adapters=True, layer_replacement=True, softmax_attention=True,
               costs="memexp.backbones.hybrid.costs:cost_shapes")
