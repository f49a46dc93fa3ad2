"""LongBench v2's schema and registration (light: no torch, so validating a config loads no benchmark code)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from memexp.core.registry import BENCHES
from memexp.core.schema import BenchConfig, _at_least, _choice, _optional_at_least


@dataclass
class LongBenchV2Config(BenchConfig):
    """LongBench v2, zero-shot; by default the NoteBank paper's QA / dialogue subset."""

    name: str = "longbench_v2"
    # A question is kept when its domain is in `domains` or its sub_domain in `sub_domains`;
    # both empty keeps all 503.
    domains: list[str] = field(default_factory=lambda: [
        "Single-Document QA", "Multi-Document QA", "Long-dialogue History Understanding"])
    sub_domains: list[str] = field(default_factory=lambda: ["User guide QA"])  # sub_domains kept besides `domains`
    # The position budget: tokens of the complete prompt (context with BOS + question).
    # pred.py's model2maxlen for most models is 120000; null = every example kept whole.
    max_length: Optional[int] = 120000
    # What an example over the budget becomes:
    #   truncate - pred.py: the prompt is cut in the middle to max_length (no room reserved);
    #   skip     - the NoteBank paper (App. C.2, 375 of 379 questions for Qwen3.5-9B): the
    #              example is kept only when prompt + reserve_template + reserve_replay +
    #              max_new_tokens <= max_length, never truncated; a skipped example is not
    #              scored, and summary.json lists it (num_skipped, skipped: its ids).
    overlength: str = "truncate"
    reserve_replay: int = 0  # skip: tokens kept for replayed notes (R x B, e.g. top-8 x 64-token notes = 512)
    reserve_template: int = 0  # skip: tokens the backbone's chat template adds around the prompt
    max_new_tokens: int = 128  # pred.py without CoT; with skip, also reserved for generation
    num_samples: Optional[int] = None  # first questions after filtering; null = all
    data_path: Optional[str] = None  # data.json (a list) or a .jsonl of records
    cache_dir: str = "outputs/cache/data/longbench_v2"  # downloaded data (relative: under paths.root)
    hub_id: str = "THUDM/LongBench-v2"  # the hub dataset `memexp data` reads

    def __post_init__(self) -> None:
        super().__post_init__()  # bench.shard
        _optional_at_least("bench.max_length", self.max_length, 2)
        _choice("bench.overlength", self.overlength, ("truncate", "skip"))
        _at_least("bench.reserve_replay", self.reserve_replay, 0)
        _at_least("bench.reserve_template", self.reserve_template, 0)
        _at_least("bench.max_new_tokens", self.max_new_tokens, 1)
        _optional_at_least("bench.num_samples", self.num_samples, 1)


# bump when this benchmark's examples, prompts or scoring change for the same config: every run
# folder key includes it (memexp.run.identity), so old results are never resumed as new ones
VERSION = 1
BENCHES.register(LongBenchV2Config.name, "memexp.benchmarks.longbench_v2.benchmark:LongBenchV2", schema=LongBenchV2Config, version=VERSION)
