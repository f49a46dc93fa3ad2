"""LongBench v1's schema and registration (light: no torch, so validating a config loads no benchmark code)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from memexp.benchmarks.longbench.tasks import TASKS
from memexp.core.registry import BENCHES
from memexp.core.schema import BenchConfig, _optional_at_least, _tasks

# the allowed subsets are the implementation's task table
LONGBENCH_TASKS = tuple(TASKS)


@dataclass
class LongBenchConfig(BenchConfig):
    """LongBench v1, the 12 English subsets of the NoteBank paper's Table 1."""

    name: str = "longbench"
    tasks: list[str] = field(default_factory=lambda: list(LONGBENCH_TASKS))  # the English subsets to run
    num_samples: Optional[int] = 30  # first rows of each subset (the paper's 30 fixed examples); null = all
    max_length: Optional[int] = None  # middle-truncate context + question to this many tokens; null = never
    max_new_tokens: Optional[int] = None  # override LongBench's per-subset dataset2maxlen
    data_path: Optional[str] = None  # folder of <subset>.jsonl (the official data.zip layout) or one .jsonl
    cache_dir: str = "outputs/cache/data/longbench"  # downloaded data (relative: under paths.root)
    hub_id: str = "THUDM/LongBench"  # the hub dataset `memexp data` reads

    def __post_init__(self) -> None:
        super().__post_init__()  # bench.shard
        _tasks("bench.tasks", self.tasks, LONGBENCH_TASKS)
        _optional_at_least("bench.num_samples", self.num_samples, 1)
        _optional_at_least("bench.max_length", self.max_length, 2)
        _optional_at_least("bench.max_new_tokens", self.max_new_tokens, 1)


# bump when this benchmark's examples, prompts or scoring change for the same config: every run
# folder key includes it (memexp.run.identity), so old results are never resumed as new ones
VERSION = 1
BENCHES.register(LongBenchConfig.name, "memexp.benchmarks.longbench.benchmark:LongBench", schema=LongBenchConfig, version=VERSION)
