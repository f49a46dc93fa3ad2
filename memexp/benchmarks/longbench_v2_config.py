"""LongBench v2's schema and registration (light: no torch, so validating a config loads no benchmark code)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from memexp.config import BenchConfig, _at_least, _choice, _optional_at_least
from memexp.registry import BENCHES


@dataclass
class LongBenchV2Config(BenchConfig):
    """LongBench v2, zero-shot; by default the NoteBank paper's QA / dialogue subset."""

    name: str = "longbench_v2"
    # A question is kept when its domain is in `domains` or its sub_domain in `sub_domains`;
    # both empty keeps all 503.
    domains: list[str] = field(default_factory=lambda: [
        "Single-Document QA", "Multi-Document QA", "Long-dialogue History Understanding"])
    sub_domains: list[str] = field(default_factory=lambda: ["User guide QA"])
    max_length: Optional[int] = 120000  # pred.py's model2maxlen for most models; null = never truncate
    overlength: str = "truncate"  # truncate (pred.py, middle) | skip (the paper: keep what fits)
    max_new_tokens: int = 128  # pred.py without CoT
    num_samples: Optional[int] = None  # first questions after filtering; null = all
    data_path: Optional[str] = None  # data.json (a list) or a .jsonl of records
    cache_dir: str = "outputs/cache/data/longbench_v2"
    hub_id: str = "THUDM/LongBench-v2"

    def __post_init__(self) -> None:
        _optional_at_least("bench.max_length", self.max_length, 2)
        _choice("bench.overlength", self.overlength, ("truncate", "skip"))
        _at_least("bench.max_new_tokens", self.max_new_tokens, 1)
        _optional_at_least("bench.num_samples", self.num_samples, 1)


# bump when this benchmark's examples, prompts or scoring change for the same config: every run
# folder key includes it (memexp.run_identity), so old results are never resumed as new ones
VERSION = 1
BENCHES.register(LongBenchV2Config.name, "memexp.benchmarks.longbench_v2:LongBenchV2", schema=LongBenchV2Config, version=VERSION)
