"""JRT's schema and registration (light: no torch, so validating a config loads no model code)."""

from __future__ import annotations

from dataclasses import dataclass

from memexp.config import MethodConfig
from memexp.registry import METHODS


@dataclass
class JRTConfig(MethodConfig):
    """JRT-Prompt: context and question read twice before generation."""

    name: str = "jrt"
    separator: str = "\n\n"  # text between the first and second reading


METHODS.register(JRTConfig.name, "memexp.methods.jrt:JRT", schema=JRTConfig)
