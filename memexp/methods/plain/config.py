"""Plain's schema and registration, and its clean-start control (light: no torch, so validating a
config loads no model code)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from memexp.core.registry import METHODS
from memexp.core.schema import MethodConfig
from memexp.methods.read_adapter import check_adapter_field
from memexp.methods.rescale import check_rescale


@dataclass
class PlainConfig(MethodConfig):
    """Context, question, greedy generation."""

    name: str = "plain"
    # lambda applied to the recurrent state after the context, before the question (App. C.3's
    # matched control for NoteBank's rescale); null = none
    rescale: Optional[float] = None
    # a read-adapter folder (memexp train recipe=notebank_lora recipe.replay=false: the paper's
    # Table 4 Plain + LoRA control), on for the question and the answer; null = none
    adapter: Optional[str] = None

    def __post_init__(self) -> None:
        check_rescale(self.rescale)
        check_adapter_field(self.adapter)


@dataclass
class CleanStartConfig(PlainConfig):
    """Clean start (NoteBank paper, App. C.3 and Table 6): Plain with the recurrent state reset
    right before the question, no replay. Conv windows, KV caches and positions are kept."""

    name: str = "clean_start"
    rescale: Optional[float] = 0.0  # a number: a clean start without a rescale would be Plain

    def __post_init__(self) -> None:
        check_rescale(self.rescale, allow_none=False)
        check_adapter_field(self.adapter)


# adds_flops=False: the paper's Plain reading, so the cost model counts no added FLOPs (memexp.costs.report)
# Read identity (memexp.methods.read_identity): the rescale and the adapter act after the context, so
# Plain, its clean start and Plain + LoRA read a context alike (the adapter changes the loaded backbone).
PLAIN_READ = {"answer_fields": ("rescale", "adapter"), "backbone_fields": ("adapter",)}
METHODS.register(PlainConfig.name, "memexp.methods.plain.method:Plain", schema=PlainConfig, adds_flops=False,
                 **PLAIN_READ)
# The clean start is Plain under another default, so it runs Plain's code; its own name keeps its
# run folders and records apart from Plain's.
METHODS.register(CleanStartConfig.name, "memexp.methods.plain.method:Plain", schema=CleanStartConfig, adds_flops=False,
                 **PLAIN_READ)
