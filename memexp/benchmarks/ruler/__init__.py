"""RULER (NVIDIA/RULER): needle-in-a-haystack, variable tracking, word extraction and QA,
generated locally for the backbone's tokenizer."""

from memexp.benchmarks.ruler.benchmark import Ruler

__all__ = ["Ruler"]
