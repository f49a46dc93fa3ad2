"""QuALITY's schema and registration (light: no torch, so validating a config loads no benchmark code)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from memexp.core.registry import BENCHES
from memexp.core.schema import BenchConfig, ConfigError, _at_least, _choice, _optional_at_least

# each prompt format and its default generation budget
QUALITY_PROMPTS = {"zeroscrolls": 10, "titan_sft": 1}


@dataclass
class QualityConfig(BenchConfig):
    """QuALITY multiple-choice QA over a story, one example per article (Titan-Llama paper)."""

    name: str = "quality"
    split: str = "dev"  # dev | train (test labels are not released)
    # zeroscrolls: ZeroSCROLLS' layout, BOS, a letter parsed from 10 generated tokens (memexp's
    # reconstruction); titan_sft: the Titan-Llama authors' QuALITY SFT format byte for byte
    # ("{article}\n\nQuestion: ...\nChoices:\nA. ...\nAnswer:", no BOS, no chat template),
    # scored by the one generated token being exactly " X", as the authors' accuracy counts
    # (memexp/benchmarks/quality/benchmark.py); bench.max_new_tokens must stay 1
    prompt: str = "zeroscrolls"
    max_length: Optional[int] = None  # middle-truncate context + longest question; null = never
    max_new_tokens: Optional[int] = None  # null = the prompt's: 10 (ZeroSCROLLS' budget), 1 for titan_sft
    num_samples: Optional[int] = None  # first articles; null = all
    data_path: Optional[str] = None  # a QuALITY.v1.0.1.htmlstripped.<split> file or its folder
    cache_dir: str = "outputs/cache/data/quality"  # downloaded data (relative: under paths.root)
    # where `memexp data` downloads the split files
    url: str = "https://raw.githubusercontent.com/nyu-mll/quality/main/data/v1.0.1/"

    def __post_init__(self) -> None:
        super().__post_init__()  # bench.shard
        _choice("bench.split", self.split, ("dev", "train"))
        _choice("bench.prompt", self.prompt, QUALITY_PROMPTS)
        _optional_at_least("bench.max_length", self.max_length, 2)
        if self.max_new_tokens is None:
            self.max_new_tokens = QUALITY_PROMPTS[self.prompt]
        _at_least("bench.max_new_tokens", self.max_new_tokens, 1)
        if self.prompt == "titan_sft":
            # the authors' accuracy reads one position (the argmax at "Answer:"); a longer answer's first
            # token cannot be told from its text, so no other budget is offered
            if self.max_new_tokens != 1:
                raise ConfigError(f"bench.max_new_tokens={self.max_new_tokens!r}: bench.prompt=titan_sft scores the one "
                                  f"generated token, as the Titan-Llama authors' accuracy does; allowed values are 1")
        _optional_at_least("bench.num_samples", self.num_samples, 1)


# bump when this benchmark's examples, prompts or scoring change for the same config: every run
# folder key includes it (memexp.run.identity), so old results are never resumed as new ones
# 2: titan_sft scores the one generated token by exact equality with " X" (it accepted "B", " B.")
VERSION = 2
BENCHES.register(QualityConfig.name, "memexp.benchmarks.quality.benchmark:Quality", schema=QualityConfig, version=VERSION)
