"""LongHealth's schema and registration (light: no torch, so validating a config loads no benchmark code)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from memexp.core.registry import BENCHES
from memexp.core.schema import BenchConfig, _at_least, _choice, _optional_at_least, _tasks

# task1: the patient's own letters; task2: plus other patients' letters; task3: distractors only
LONGHEALTH_TASKS = ("task1", "task2", "task3")


@dataclass
class LongHealthConfig(BenchConfig):
    """LongHealth multiple-choice QA over a patient's discharge letters (Titan-Llama paper)."""

    name: str = "longhealth"
    # task1 (the patient's letters) | task2 (+ distractors) | task3 (distractors only)
    tasks: list[str] = field(default_factory=lambda: ["task1"])
    seed: int = 0  # document order and distractor sampling
    # greedy: one answer per question (the Titan-Llama paper's numbers); official: the
    # script's 5 passes per question, letters reshuffled / distractors resampled per pass
    protocol: str = "greedy"
    num_distractors: int = 10  # documents of other patients in tasks 2 and 3
    # token budget for documents + question (official: 16000 - system); answer letters are
    # selected first, then the others; null = all letters
    max_length: Optional[int] = None
    max_new_tokens: int = 50  # tokens generated per answer
    num_samples: Optional[int] = None  # first patients; null = all 20
    data_path: Optional[str] = None  # benchmark_v5.json
    cache_dir: str = "outputs/cache/data/longhealth"  # the downloaded file (relative: under paths.root)
    # what `memexp data` downloads
    url: str = "https://raw.githubusercontent.com/kbressem/LongHealth/main/data/benchmark_v5.json"

    def __post_init__(self) -> None:
        super().__post_init__()  # bench.shard
        _tasks("bench.tasks", self.tasks, LONGHEALTH_TASKS)
        _choice("bench.protocol", self.protocol, ("greedy", "official"))
        _at_least("bench.num_distractors", self.num_distractors, 0)
        _optional_at_least("bench.max_length", self.max_length, 1)
        _at_least("bench.max_new_tokens", self.max_new_tokens, 1)
        _optional_at_least("bench.num_samples", self.num_samples, 1)


# bump when this benchmark's examples, prompts or scoring change for the same config: every run
# folder key includes it (memexp.run.identity), so old results are never resumed as new ones
VERSION = 1
BENCHES.register(LongHealthConfig.name, "memexp.benchmarks.longhealth.benchmark:LongHealth", schema=LongHealthConfig, version=VERSION)
