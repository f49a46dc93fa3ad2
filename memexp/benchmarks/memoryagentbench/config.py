"""MemoryAgentBench's schema and registration (light: no torch, so validating a config loads no benchmark code)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from memexp.benchmarks.memoryagentbench.tasks import TASKS
from memexp.core.registry import BENCHES
from memexp.core.schema import BenchConfig, _at_least, _choice, _optional_at_least, _tasks

# the allowed configurations are the implementation's task table
MEMORYAGENTBENCH_TASKS = tuple(TASKS)


@dataclass
class MemoryAgentBenchConfig(BenchConfig):
    """MemoryAgentBench as its long-context agent sees it; the NoteBank paper's 11 configurations."""

    name: str = "memoryagentbench"
    tasks: list[str] = field(default_factory=lambda: list(MEMORYAGENTBENCH_TASKS))  # the configurations to run
    chunk_size: int = 4096  # tokens per memorised chunk (every data config's chunk_size)
    chunker: str = "official"  # official: nltk punkt + tiktoken o200k_base | approximate: regex + backbone tokens
    time_stamp: str = "2025-01-01 00:00:00"  # the agent stamps each chunk with the clock; fixed here
    input_length_limit: Optional[int] = None  # the agent's window; null = unlimited (no truncation)
    max_questions: Optional[int] = None  # first questions of each context; null = all
    data_path: Optional[str] = None  # folder of <source>.jsonl, or one .jsonl/.json of rows
    cache_dir: str = "outputs/cache/data/memoryagentbench"  # downloaded data (relative: under paths.root)
    hub_id: str = "ai-hyz/MemoryAgentBench"  # the hub dataset `memexp data` reads

    def __post_init__(self) -> None:
        super().__post_init__()  # bench.shard
        _tasks("bench.tasks", self.tasks, MEMORYAGENTBENCH_TASKS)
        _at_least("bench.chunk_size", self.chunk_size, 1)
        _choice("bench.chunker", self.chunker, ("official", "approximate"))
        _optional_at_least("bench.input_length_limit", self.input_length_limit, 1)
        _optional_at_least("bench.max_questions", self.max_questions, 1)


# bump when this benchmark's examples, prompts or scoring change for the same config: every run
# folder key includes it (memexp.run.identity), so old results are never resumed as new ones
VERSION = 1
BENCHES.register(MemoryAgentBenchConfig.name, "memexp.benchmarks.memoryagentbench.benchmark:MemoryAgentBench",
                 schema=MemoryAgentBenchConfig, version=VERSION)
