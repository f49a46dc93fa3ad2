"""Plain's schema and registration (light: no torch, so validating a config loads no model code)."""

from __future__ import annotations

from dataclasses import dataclass

from memexp.config import MethodConfig
from memexp.registry import METHODS


@dataclass
class PlainConfig(MethodConfig):
    """Context, question, greedy generation."""

    name: str = "plain"


METHODS.register(PlainConfig.name, "memexp.methods.plain:Plain", schema=PlainConfig)
