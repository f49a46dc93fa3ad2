"""Training recipes run by `python -m memexp train recipe=<name>` (see memexp.training.cli)."""

from memexp.training.cli import main

__all__ = ["main"]
