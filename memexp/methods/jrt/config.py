"""JRT's schema and registration (light: no torch, so validating a config loads no model code)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from memexp.core.registry import METHODS
from memexp.core.schema import MethodConfig
from memexp.methods.rescale import check_rescale


@dataclass
class JRTConfig(MethodConfig):
    """JRT-Prompt: context and question read twice before generation."""

    name: str = "jrt"
    separator: str = "\n\n"  # text between the first and second reading
    # lambda applied to the recurrent state after the context's first reading, before the second
    # (the boundary of NoteBank's rescale, App. C.3); null = none
    rescale: Optional[float] = None

    def __post_init__(self) -> None:
        check_rescale(self.rescale)


# Read identity (memexp.methods.read_identity): the separator and the rescale act after the first reading.
METHODS.register(JRTConfig.name, "memexp.methods.jrt.method:JRT", schema=JRTConfig,
                 answer_fields=("separator", "rescale"))
