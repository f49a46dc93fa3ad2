"""Memory methods: `build_method(cfg)` turns a validated method config into a Method."""

from __future__ import annotations

from memexp.config import MethodConfig
from memexp.methods.base import Answer, Memory, Method


def build_method(cfg: MethodConfig) -> Method:
    if cfg.name == "plain":
        from memexp.methods.plain import Plain

        return Plain(cfg)
    if cfg.name == "jrt":
        from memexp.methods.jrt import JRT

        return JRT(cfg)
    if cfg.name == "notebank":
        from memexp.methods.notebank.method import NoteBank

        return NoteBank(cfg)
    raise ValueError(f"method.name={cfg.name!r}: no implementation")


__all__ = ["Answer", "Memory", "Method", "build_method"]
