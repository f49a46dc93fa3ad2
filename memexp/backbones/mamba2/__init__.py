"""Mamba-2 (mamba_ssm and Megatron checkpoints)."""

from memexp.core.registry import ARCHS

ARCHS.register("mamba2", "memexp.backbones.mamba2.model:build", schema="memexp.backbones.mamba2.model:Mamba2Config",
               recurrent_channels=True, adapters=True, layer_replacement=True,
               costs="memexp.backbones.mamba2.costs:cost_shapes")
