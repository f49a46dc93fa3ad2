"""RULER's schema and registration (light: no torch, so validating a config loads no benchmark code)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from memexp.benchmarks.ruler.tasks import TASKS
from memexp.core.registry import BENCHES
from memexp.core.schema import BenchConfig, ConfigError, _at_least, _distinct, _tasks, files_checked

# the allowed tasks are the implementation's task table
RULER_TASKS = tuple(TASKS)


@dataclass
class RulerConfig(BenchConfig):
    """RULER NIAH, generated locally as a pure function of (task, length, seed, tokenizer)."""

    name: str = "ruler"
    tasks: list[str] = field(default_factory=lambda: ["niah_single_1"])  # RULER tasks to generate (each once)
    lengths: list[int] = field(default_factory=lambda: [4096])  # target tokens incl. generation
    num_samples: int = 100  # examples per task and length
    seed: int = 42  # RULER's default random seed
    essay_path: Optional[str] = None  # Paul Graham essays: local .json {"text": ...} or .txt
    # true: the essay tasks hide needles in memexp's generated stand-in prose (ruler/standin.py),
    # for offline runs; every record then names that source, since scores on it are not RULER's
    essay_standin: bool = False
    cache_dir: str = "outputs/cache/ruler"  # generated examples, keyed by all inputs
    max_new_tokens: Optional[int] = None  # override RULER's tokens_to_generate (128 for NIAH)
    squad_path: Optional[str] = None  # qa_1: SQuAD v2.0 dev-v2.0.json; null = hub when online
    hotpotqa_path: Optional[str] = None  # qa_2: hotpot_dev_distractor_v1.json; null = hub when online
    cwe_words_path: Optional[str] = None  # cwe beyond wonderwords' 8166 words: RULER's english_words.json

    def __post_init__(self) -> None:
        super().__post_init__()  # bench.shard
        _tasks("bench.tasks", self.tasks, RULER_TASKS)
        if not self.lengths:
            raise ConfigError("bench.lengths is empty: give target lengths in tokens, e.g. [4096]")
        for n in self.lengths:
            _at_least("bench.lengths", n, 64)
        _distinct("bench.lengths", self.lengths)
        _at_least("bench.num_samples", self.num_samples, 1)
        if self.essay_path is not None and files_checked() and not Path(self.essay_path).expanduser().exists():
            raise ConfigError(f"bench.essay_path={self.essay_path!r}: no such file")
        if self.essay_standin and self.essay_path is not None:
            raise ConfigError("bench.essay_standin=true and bench.essay_path are both set: choose one essay source")
        if self.max_new_tokens is not None:
            _at_least("bench.max_new_tokens", self.max_new_tokens, 1)


# bump when this benchmark's examples, prompts or scoring change for the same config: every run
# folder key includes it (memexp.run.identity), so old results are never resumed as new ones
# (2: each sample's haystack fitted on its own)
VERSION = 2
BENCHES.register(RulerConfig.name, "memexp.benchmarks.ruler.benchmark:Ruler", schema=RulerConfig, version=VERSION)
