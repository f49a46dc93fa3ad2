"""The notebank_lora recipe's schema (NoteBank paper App. C.4), filled by conf/recipe/notebank_lora.yaml
and the backbone's conf/recipe/notebank_lora_<backbone>.yaml (its adapter placement, App. B.4).

What the paper leaves open is a field here with memexp's default, marked "memexp's choice":
the learning-rate schedule (constant), the Adam betas (PyTorch's), the prompt template, and
how a context over the character cap is cut (at the last document boundary before it).
Light (no torch): `memexp train` validates a recipe before it loads any model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from memexp.core.schema import ConfigError, LoggerConfig, _at_least, _choice

SOURCES = ("nq", "ruler")
SCHEDULES = ("constant", "cosine")


@dataclass
class Placement:
    """Which projections get adapters: `modules` (names with `{layer}`) in each of `layers`."""

    layers: Optional[list[int]] = None  # zero-indexed; null = this backbone has no placement file
    modules: list[str] = field(default_factory=list)  # e.g. "model.layers.{layer}.attn.q_proj"
    rows: dict[str, list[str]] = field(default_factory=dict)  # glob -> fused parts, e.g. {"*.in_proj": [xBC]}
    rank: int = 8  # r
    alpha: float = 16.0  # the update is scaled by alpha / r
    dropout: float = 0.0  # dropout on the adapter's input (0 = none)
    seed: int = 0  # A's initialisation (B starts at zero)

    def targets(self) -> list[str]:
        return [m.format(layer=i) for i in self.layers for m in self.modules]


@dataclass
class DataConfig:
    """Where the training examples come from.

    `nq`: the Natural Questions-derived rows of the fine-tune collection, read from `data_path`
    (a .jsonl, .json or .parquet file, or a folder of them) or the hub. The collection's rows have
    three string columns (its card: text, prompt, completion): `prompt_field` holds the instruction,
    the documents "Document [i](Title: ...) ..." and `question_marker` + question; `completion_field`
    holds `answer_marker` + the short answer, then `long_answer_marker` + the gold passage's text and
    `gold_marker` + the gold document's number (the trailer); `text_field` is the two together, read
    when a row has no prompt / completion columns. Rows without a `document_marker` before the
    question are other sources (BookSum) and skipped.
    `ruler`: examples of memexp's RULER generator (tasks x lengths) on the training `seed`, never
    an evaluation seed; the tiny recipes use it.
    """

    source: str = "nq"  # nq: the fine-tune collection's NQ rows | ruler: memexp's RULER generator
    hub_id: str = "emozilla/Long-Data-Collections-Fine-Tune"  # the collection on the hub (read when data_path is null)
    hub_split: str = "train"  # its split
    text_field: str = "text"  # the column holding prompt and completion together
    document_marker: str = "Document ["  # marks an NQ multi-document row (and where documents start)
    question_marker: str = "Question:"  # starts the question inside the prompt column
    answer_marker: str = "Answer:"  # starts the short answer inside the completion column
    # anything left after the short answer that names the gold document, removed (regex)
    trailer_pattern: str = r"(?i)\s*[\[(]?gold[ _-]?(?:document|doc|passage)\b[^\n]*$"
    prompt_field: str = "prompt"  # the column holding the instruction, the documents and the question
    completion_field: str = "completion"  # the column holding the answer, the gold passage and the trailer
    long_answer_marker: str = "Long Answer:"  # ends the short answer: the gold passage's text follows
    gold_marker: str = "Gold Document ID:"  # the trailer: the gold document's number in "Document [n]"
    heldout: int = 354  # no-support examples after the drawn ones, kept for diagnostics (App. C.4)
    max_context_chars: int = 16000  # contexts longer than this are cut before their last whole document
    min_answer_words: int = 1  # shorter short answers are skipped
    max_answer_words: int = 24  # longer short answers are skipped
    examples: int = 2400  # drawn once, without replacement, after one shuffle with shuffle_seed
    shuffle_seed: int = 0  # the seed of the one shuffle before drawing `examples`
    max_target_tokens: int = 47  # answer tokens kept; EOS follows
    # memexp's choice: the prompt around the parsed parts (the context is read with BOS first)
    context_template: str = "{context}"
    question_template: str = "\n\nQuestion: {question}\nAnswer:"  # the question's text after the context and the notes
    answer_template: str = " {answer}"  # the target after the question (EOS follows)
    # source=ruler
    tasks: list[str] = field(default_factory=lambda: ["niah_single_1"])
    lengths: list[int] = field(default_factory=lambda: [1024])  # source=ruler: the context lengths generated
    seed: int = 1000  # RULER streams "<task>/<seed>/<i>": evaluation uses 42 (and its own other seeds)
    samples: int = 100  # per task and length
    ruler: dict = field(default_factory=dict)  # more RulerConfig fields for the generator (an essay source)

    def check(self) -> None:
        _choice("recipe.data.source", self.source, SOURCES)
        _at_least("recipe.data.max_context_chars", self.max_context_chars, 1)
        _at_least("recipe.data.min_answer_words", self.min_answer_words, 1)
        if self.max_answer_words < self.min_answer_words:
            raise ConfigError(f"recipe.data.max_answer_words={self.max_answer_words}: must be >= "
                              f"min_answer_words={self.min_answer_words}")
        _at_least("recipe.data.examples", self.examples, 1)
        _at_least("recipe.data.heldout", self.heldout, 0)
        _at_least("recipe.data.max_target_tokens", self.max_target_tokens, 1)
        _at_least("recipe.data.samples", self.samples, 1)
        for name in ("context", "question", "answer"):
            template = getattr(self, f"{name}_template")
            if "{" + name + "}" not in template:
                raise ConfigError(f"recipe.data.{name}_template={template!r}: must contain {{{name}}}")
        if self.source == "ruler":
            from memexp.benchmarks.ruler.config import RULER_TASKS

            for task in self.tasks:
                _choice("recipe.data.tasks", task, RULER_TASKS)
            if self.seed == 42:
                raise ConfigError("recipe.data.seed=42: RULER's evaluation seed; train on another")


@dataclass
class NoteBankLoRARecipe:
    """600 AdamW updates x 4 accumulated examples of read-adapter training (App. C.4)."""

    backbone: str = "gdn"  # a conf/backbone option; its NoteBank settings come with it
    overrides: list[str] = field(default_factory=list)  # run-config overrides, e.g. [backbone.pretrained=/dir]
    replay: bool = True  # false: the Table 4 control, Plain + LoRA (no notes, no replay), same data and budget
    # NoteBank fields over the backbone's own (conf/method_for_backbone/), e.g. {replay_budget: 1}; null = none
    notebank: Optional[dict] = None
    lora: Placement = field(default_factory=Placement)
    data: DataConfig = field(default_factory=DataConfig)
    data_path: Optional[str] = None  # a local copy of the data (nq); null = the hub (online)
    steps: int = 600  # optimiser updates
    accumulate: int = 4  # examples per update
    lr: float = 5e-4  # the learning rate (constant unless `schedule` says otherwise)
    weight_decay: float = 0.01  # AdamW's weight decay
    clip: float = 1.0  # max global grad norm
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])  # memexp's choice: PyTorch's
    schedule: str = "constant"  # memexp's choice; cosine: to 10 % of lr after `warmup` steps
    warmup: int = 0  # linear warm-up steps (memexp's choice: none)
    seed: int = 0  # read by no training step (lora.seed seeds the adapters, data.shuffle_seed the draw)
    checkpoint_every: int = 50  # updates between checkpoints (resume: the same command)
    log_every: int = 10  # updates between logged lines
    threads: int = 2  # torch CPU threads
    # keep each example's context state and notes after its first read (they are constants), so a
    # data pool smaller than steps x accumulate is read once; costs one state per example in memory
    cache_reads: bool = False
    logger: LoggerConfig = field(default_factory=LoggerConfig)  # logger.name=wandb: loss, lr, grad norm, tokens/s
    output: Optional[str] = None  # the adapter folder; null = outputs/train/notebank_lora/<time> (memexp.cli.train)
    replace_assets: bool = False  # write memexp/assets/<asset> (a shipped adapter) instead of `output`
    asset: Optional[str] = None  # the folder under memexp/assets that replace_assets writes

    def __post_init__(self) -> None:
        self.data.check()
        if self.lora.layers is not None and (not self.lora.layers or not self.lora.modules):
            raise ConfigError("recipe.lora: give layers and modules (e.g. model.layers.{layer}.attn.q_proj)")
        for m in self.lora.modules:
            if "{layer}" not in m:
                raise ConfigError(f"recipe.lora.modules: {m!r} has no {{layer}}")
        _at_least("recipe.lora.rank", self.lora.rank, 1)
        _at_least("recipe.steps", self.steps, 1)
        _at_least("recipe.accumulate", self.accumulate, 1)
        _at_least("recipe.checkpoint_every", self.checkpoint_every, 1)
        _at_least("recipe.log_every", self.log_every, 1)
        _at_least("recipe.warmup", self.warmup, 0)
        _choice("recipe.schedule", self.schedule, SCHEDULES)
        if not self.lr > 0 or self.weight_decay < 0 or not self.clip > 0:
            raise ConfigError(f"recipe: need lr > 0, weight_decay >= 0, clip > 0 (got {self.lr}, "
                              f"{self.weight_decay}, {self.clip})")
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise ConfigError(f"recipe.betas={self.betas!r}: two numbers in [0, 1)")
        if self.replace_assets and not self.asset:
            raise ConfigError("recipe.replace_assets=true: name recipe.asset, the folder under memexp/assets")
        bad = [k for k in (self.notebank or {}) if k in ("name", "adapter")]
        if bad:
            raise ConfigError(f"recipe.notebank.{bad[0]}: not a NoteBank setting a recipe may change")

    def run_arguments(self) -> list[str]:
        """The `memexp run` arguments of the run configuration the adapter is trained for: the
        backbone and its NoteBank (or Plain, without replay) settings. The CLI composes them
        (memexp.cli.train.run_config) and hands the result to the recipe's run."""
        if self.lora.layers is None:
            raise ConfigError(self.placement_error())
        method = "notebank" if self.replay else "plain"
        return [f"backbone={self.backbone}", f"method={method}", "bench=ruler", *self.overrides]

    def placement_error(self) -> str:
        return (f"recipe.lora.layers is null: backbone={self.backbone} has no conf/recipe/notebank_lora_"
                f"{self.backbone}.yaml; give recipe.lora.layers=[...] and recipe.lora.modules=[...]")
