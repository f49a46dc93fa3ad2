"""Gated DeltaNet (FLA's GatedDeltaNetForCausalLM)."""

from memexp.core.registry import ARCHS

ARCHS.register("gdn", "memexp.backbones.gdn.model:build", schema="memexp.backbones.gdn.model:GDNConfig",
               recurrent_channels=True, adapters=True, layer_replacement=True,
               costs="memexp.backbones.gdn.costs:cost_shapes")
