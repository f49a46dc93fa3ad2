"""Gated DeltaNet-2 (NVlabs' LitGPT checkpoint)."""

from memexp.core.registry import ARCHS

ARCHS.register("gdn2", "memexp.backbones.gdn2.model:build", schema="memexp.backbones.gdn2.model:GDN2Config",
               recurrent_channels=True, adapters=True, layer_replacement=True,
               costs="memexp.backbones.gdn2.costs:cost_shapes")
