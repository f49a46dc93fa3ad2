"""The titan_llama / tiny_titan recipe schema (light: no torch).

The authors' three post-training stages (configs/seg512_{pretrain,gold_sft,quality_sft} of their
released code) are `stages` entries of conf/recipe/titan_llama.yaml; tiny_titan is the same
recipe with one NIAH stage on memexp's tiny Llama (conf/recipe/tiny_titan.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from memexp.core.schema import ConfigError, _at_least, _choice, _existing_path, _optional_at_least

NEEDLE_PLACEMENTS = ("anywhere", "earlier_segment")
STAGE_DATA = ("pretrain_mix", "gold_sft", "quality_sft", "niah")
WANDB_MODES = ("none", "auto", "online", "offline")


@dataclass
class Source:
    """One corpus: a local copy (`path`: a .jsonl / .json / .parquet file or a folder of them) or,
    with `path` null, the hub dataset `hub` (`config`, `split`), streamed."""

    path: Optional[str] = None  # a local copy: a .jsonl / .json / .parquet file or a folder of them
    hub: str = ""  # the hub dataset id read when path is null
    config: Optional[str] = None  # the hub dataset's configuration (subset), if it has several
    split: str = "train"  # the hub dataset's split

    def check(self, where: str) -> None:
        _existing_path(f"{where}.path", self.path)
        if self.path is None and not self.hub:
            raise ConfigError(f"{where}: give path (a local copy) or hub (a dataset id)")


@dataclass
class NiahData:
    """tiny_titan's text: memexp's NIAH sequences (memexp.embedded.niah_text), loss on the answer."""

    question: str = "ruler"  # ruler | short
    min_lines: int = 1  # noise lines per sequence, drawn uniformly per sequence
    max_lines: int = 20  # the most noise lines per sequence
    # anywhere: RULER's depths; earlier_segment: redraw until the whole needle lies in a segment before
    # the question's, so only the memory can answer (segmented attention never sees the needle)
    needle: str = "anywhere"


@dataclass
class Stage:
    """One post-training stage: its data, batch and the memory group's learning-rate schedule
    (linear warmup from warmup_start_lr, then cosine from lr to min_lr over the remaining steps)."""

    name: str = "pretrain"  # the stage's name: its folder under the output, and what `only=<name>` runs
    data: str = "pretrain_mix"  # pretrain_mix | gold_sft | quality_sft | niah
    total_tokens: int = 1_000_000_000  # steps = total_tokens // (batch_size * sequence_length), as the code
    batch_size: int = 64  # sequences per optimizer step, over all ranks
    micro_batch_size: int = 2  # sequences per forward on one rank (gradient accumulation fills the batch)
    lr: float = 5e-4  # peak learning rate, after the warmup
    min_lr: float = 1e-5  # where the cosine ends
    warmup_start_lr: float = 1e-5  # the learning rate of the warmup's first step
    warmup_steps: int = 10  # linear warmup steps, from warmup_start_lr to lr
    save_every: int = 25  # optimizer steps between checkpoints (and at the end)
    longalign_examples: int = 9984  # gold_sft: LongAlign SFT rows in the mix
    loongrl_examples: int = 2496  # gold_sft: LoongRL rows in the mix
    quality_examples: int = 7569  # quality_sft: questions drawn, cycling the shuffled train split (3 epochs)

    def steps(self, sequence_length: int) -> int:
        return self.total_tokens // (self.batch_size * sequence_length)


@dataclass
class TitanLlamaRecipe:
    seed: int = 42  # torch seed (the code's)
    data_seed: int = 314159  # shuffles and mixes (the code's longalign_shuffle_seed)
    output: Optional[str] = None  # run folder; rerunning with the same folder resumes; null = outputs/train/<recipe>/<time>
    # true: after the last stage, its modules and recipe.json are copied into memexp/assets/<asset>
    # (tiny_titan ships its modules; the run folder is still recipe.output, or outputs/train/<asset>/<time>)
    replace_assets: bool = False
    asset: Optional[str] = None  # with replace_assets: the folder under memexp/assets the modules are copied to
    backbone: str = "llama32_1b"  # a conf/backbone name
    backbone_fields: dict = field(default_factory=dict)  # BackboneConfig fields over it (dtype, device, pretrained, model)
    method: dict = field(default_factory=dict)  # TitanConfig fields (memexp/methods/titan/config.py)
    init_from: Optional[str] = None  # trained modules (TitanModules.save folder) the first stage starts from
    sequence_length: int = 16384  # tokens per training sequence
    pad_to_segment: bool = True  # the code's crop_trailing_padding: a padded batch is cut to whole segments
    betas: list[float] = field(default_factory=lambda: [0.9, 0.95])  # AdamW's betas
    weight_decay: float = 0.01  # AdamW's weight decay
    grad_clip: float = 10.0  # 0 = no clipping
    fineweb: Source = field(default_factory=lambda: Source(hub="HuggingFaceFW/fineweb-edu"))
    longalign: Source = field(default_factory=lambda: Source(hub="zai-org/LongAlign-10k"))
    loongrl: Source = field(default_factory=lambda: Source(hub="OldKingMeister/LoongRL-Train-Data",
                                                          config="hotpotqa_qwen_0_2500"))
    quality: Source = field(default_factory=lambda: Source(hub="QuALITY.v1.0.1.htmlstripped.train"))
    niah: NiahData = field(default_factory=NiahData)
    shuffle_buffer: int = 1024  # rows in the streaming shuffle buffer (the code's)
    stages: list[Stage] = field(default_factory=list)  # the stages, run in order (each resumable, `only=` runs one)
    only: Optional[str] = None  # run this stage alone (it starts from the previous stage's folder under output)
    stop_after: Optional[int] = None  # stop after this many optimizer steps in this call (rerun to resume)
    wandb: str = "none"  # none | auto (online with credentials, else offline) | online | offline
    wandb_project: str = "memexp-titan"  # the W&B project when W&B logging is on
    log_every: int = 1  # optimizer steps between logged lines
    threads: Optional[int] = None  # torch CPU threads; null = torch's default

    def __post_init__(self) -> None:
        if self.replace_assets and not self.asset:
            raise ConfigError("recipe.replace_assets=true: name recipe.asset, the folder under memexp/assets")
        if not self.stages:
            raise ConfigError("recipe.stages is empty: give at least one stage")
        names = [s.name for s in self.stages]
        if len(set(names)) != len(names):
            raise ConfigError(f"recipe.stages: stage names must differ, got {names}")
        if self.only is not None:
            _choice("recipe.only", self.only, tuple(names))
        _at_least("recipe.sequence_length", self.sequence_length, 2)
        _at_least("recipe.shuffle_buffer", self.shuffle_buffer, 1)
        _optional_at_least("recipe.stop_after", self.stop_after, 1)
        _choice("recipe.wandb", self.wandb, WANDB_MODES)
        _existing_path("recipe.init_from", self.init_from)
        if self.method.get("memory_dtype", "float32") != "float32":
            # AdamW on bf16 parameters would round every update away; the authors keep fp32 master
            # copies in their optimizer (fp32_adamw.py), memexp keeps the modules themselves in fp32
            raise ConfigError(f"recipe.method.memory_dtype={self.method['memory_dtype']!r}: training keeps the Titan "
                              f"modules in float32; the authors' bfloat16 is for evaluation (method.memory_dtype)")
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise ConfigError(f"recipe.betas={list(self.betas)}: two numbers in [0, 1)")
        if self.grad_clip < 0 or self.weight_decay < 0:
            raise ConfigError("recipe.grad_clip and recipe.weight_decay must be >= 0")
        for i, s in enumerate(self.stages):
            self._check_stage(f"recipe.stages.{i}", s)
        if self.niah.question not in ("ruler", "short"):
            raise ConfigError(f"recipe.niah.question={self.niah.question!r}: allowed values are ruler, short")
        _choice("recipe.niah.needle", self.niah.needle, NEEDLE_PLACEMENTS)
        if not 1 <= self.niah.min_lines <= self.niah.max_lines:
            raise ConfigError("recipe.niah: need 1 <= min_lines <= max_lines")

    def _check_stage(self, where: str, s: Stage) -> None:
        _choice(f"{where}.data", s.data, STAGE_DATA)
        _at_least(f"{where}.micro_batch_size", s.micro_batch_size, 1)
        if s.batch_size < s.micro_batch_size or s.batch_size % s.micro_batch_size:
            raise ConfigError(f"{where}.batch_size={s.batch_size}: must be a multiple of micro_batch_size="
                              f"{s.micro_batch_size}")
        if s.steps(self.sequence_length) < 1:
            raise ConfigError(f"{where}.total_tokens={s.total_tokens}: fewer than one batch of batch_size x "
                              f"sequence_length = {s.batch_size * self.sequence_length} tokens")
        if not 0 < s.min_lr <= s.lr or not 0 <= s.warmup_start_lr <= s.lr:
            raise ConfigError(f"{where}: need 0 < min_lr <= lr and 0 <= warmup_start_lr <= lr")
        _at_least(f"{where}.warmup_steps", s.warmup_steps, 0)
        _at_least(f"{where}.save_every", s.save_every, 1)
        if s.data == "gold_sft":
            _at_least(f"{where}.longalign_examples", s.longalign_examples, 0)
            _at_least(f"{where}.loongrl_examples", s.loongrl_examples, 0)
            if s.longalign_examples + s.loongrl_examples == 0:
                raise ConfigError(f"{where}: gold_sft needs longalign_examples + loongrl_examples > 0")
        if s.data == "quality_sft":
            _at_least(f"{where}.quality_examples", s.quality_examples, 1)
        used = {"pretrain_mix": ("fineweb", "longalign"), "gold_sft": ("longalign", "loongrl"),
                "quality_sft": ("quality",), "niah": ()}[s.data]
        for name in used:
            getattr(self, name).check(f"recipe.{name}")
