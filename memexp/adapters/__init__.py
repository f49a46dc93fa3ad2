"""Adapters: updates attached to named projections of a backbone, switched on by a context manager.

    from memexp.adapters import LoRAConfig, attach_lora, freeze_base, save_adapters, load_adapters
    lora = attach_lora(backbone, LoRAConfig(targets=["model.layers.*.attn.q_proj"], rank=8, alpha=16))
    freeze_base(backbone)
    with lora.enabled():
        ...                                   # the updates apply here only
    digest = save_adapters(lora, "outputs/lora")
    lora2 = load_adapters(other_backbone, "outputs/lora")
"""

from memexp.adapters.base import AdapterError, Adapters, freeze_base, model_of
from memexp.adapters.io import content_hash, file_hash, load_adapters, read_spec, save_adapters
from memexp.adapters.lora import LoRA, LoRAConfig, LoRAUpdate, attach_lora
from memexp.adapters.targets import fused_layout, resolve_targets

__all__ = [
    "AdapterError",
    "Adapters",
    "LoRA",
    "LoRAConfig",
    "LoRAUpdate",
    "attach_lora",
    "content_hash",
    "file_hash",
    "freeze_base",
    "fused_layout",
    "load_adapters",
    "model_of",
    "read_spec",
    "resolve_targets",
    "save_adapters",
]
