"""RULER (NVIDIA/RULER): needle-in-a-haystack, variable tracking, word extraction and QA,
generated locally for the backbone's tokenizer."""

from typing import Any


def __getattr__(name: str) -> Any:
    # lazy, so that the schema module beside it (ruler/config.py) validates without torch
    if name == "Ruler":
        from memexp.benchmarks.ruler.benchmark import Ruler

        return Ruler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Ruler"]
