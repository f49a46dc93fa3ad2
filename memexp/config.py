"""Typed schemas for every config group. YAML only fills them.

`validate(cfg)` turns a composed Hydra config into these dataclasses; any wrong value
raises `ConfigError` with one line naming the field and what is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException


class ConfigError(ValueError):
    """A config value is invalid; the message is one line naming the field."""


ASSETS_DIR = Path(__file__).resolve().parent / "assets"


def asset_path(name: str) -> str:
    """Absolute path of something shipped in memexp/assets, whatever the working directory:
    YAML writes it `${memexp_asset:tiny_gdn}`."""
    return str(ASSETS_DIR / name)


if not OmegaConf.has_resolver("memexp_asset"):
    OmegaConf.register_new_resolver("memexp_asset", asset_path)


def _choice(path: str, value: Any, allowed: tuple) -> None:
    if value not in allowed:
        raise ConfigError(f"{path}={value!r}: allowed values are {', '.join(map(str, allowed))}")


def _looks_like_path(value: str) -> bool:
    return value.startswith(("/", "./", "../", "~"))


def _existing_path(path: str, value: Optional[str]) -> None:
    """Local paths must exist; hub ids (org/name) are checked when the model loads."""
    if value is not None and _looks_like_path(value) and not Path(value).expanduser().exists():
        raise ConfigError(f"{path}={value!r}: no such file or directory")


def _at_least(path: str, value: Any, low: float, kind: str = "an integer") -> None:
    if value is None or value < low:
        raise ConfigError(f"{path}={value!r}: must be {kind} >= {low}")


@dataclass
class BackboneConfig:
    """A pretrained model. `pretrained` is a hub id or a local directory; with
    `pretrained=null` the model is built with random weights from `model` (tests)."""

    name: str = "tiny_gdn"
    arch: str = "gdn"  # which memexp implementation reads the checkpoint
    pretrained: Optional[str] = None
    revision: Optional[str] = None  # hub revision (commit or tag)
    tokenizer: Optional[str] = None  # tokenizer source when not beside the weights
    dtype: str = "auto"  # auto = bfloat16 on CUDA, float32 on CPU
    device: str = "auto"  # auto = cuda when available
    prefill_chunk: int = 2048  # tokens per bounded forward chunk (memory stays bounded)
    window: Optional[int] = None  # sliding attention window (attention backbones)
    chat: bool = False  # wrap context + question in the checkpoint's chat template (instruct models)
    model: dict = field(default_factory=dict)  # architecture fields for random init
    seed: int = 0  # random-init seed

    ARCHS = ("gdn", "gdn2", "mamba2", "qwen35", "llama")

    def __post_init__(self) -> None:
        _choice("backbone.arch", self.arch, self.ARCHS)
        _choice("backbone.dtype", self.dtype, ("auto", "float32", "bfloat16", "float16"))
        _choice("backbone.device", self.device, ("auto", "cpu", "cuda"))
        _at_least("backbone.prefill_chunk", self.prefill_chunk, 1)
        if self.window is not None:
            _at_least("backbone.window", self.window, 1)
        _existing_path("backbone.pretrained", self.pretrained)
        if self.tokenizer != "byte":
            _existing_path("backbone.tokenizer", self.tokenizer)
        if self.pretrained is None and not self.model:
            raise ConfigError(
                "backbone.pretrained is missing: give a hub id or local directory "
                "(or backbone.model fields for a random-init model)"
            )


@dataclass
class MethodConfig:
    name: str = "plain"


@dataclass
class PlainConfig(MethodConfig):
    """Context, question, greedy generation."""

    name: str = "plain"


@dataclass
class JRTConfig(MethodConfig):
    """JRT-Prompt: context and question read twice before generation."""

    name: str = "jrt"
    separator: str = "\n\n"  # text between the first and second reading


@dataclass
class NoteBankConfig(MethodConfig):
    """NoteBank-TF (NoteBank paper, Algorithm 1 and App. B)."""

    name: str = "notebank"
    write_budget: int = 2  # W: notes per chunk (1 or 2)
    replay_budget: int = 2  # R: notes replayed per question
    span_budget: int = 64  # B: max tokens per note
    chunk_size: int = 512  # C: tokens per write chunk
    window: int = 48  # scoring window (tokens)
    tail: int = 32  # tokens of the previous chunk added to the candidate region
    address_dim: Optional[int] = 16  # d_rho: coordinates kept per address; null = identity
    address_seed: int = 0  # seed of the fixed coordinate selection
    rescale: Optional[float] = None  # lambda applied to the recurrent state before replay; null = none
    router: str = "native"  # native | random | bm25 | embedding | oracle
    router_seed: int = 0  # seed of the random router
    note_separator: str = " "  # text between replayed notes
    replay_suffix: str = " "  # text between the replayed notes and the question

    ROUTERS = ("native", "random", "bm25", "embedding", "oracle")

    def __post_init__(self) -> None:
        _choice("method.write_budget", self.write_budget, (1, 2))
        _at_least("method.replay_budget", self.replay_budget, 1)
        _at_least("method.span_budget", self.span_budget, 1)
        _at_least("method.chunk_size", self.chunk_size, 1)
        _at_least("method.window", self.window, 1)
        _at_least("method.tail", self.tail, 0)
        if self.address_dim is not None:
            _at_least("method.address_dim", self.address_dim, 1)
        if self.rescale is not None and not 0.0 <= self.rescale <= 1.0:
            raise ConfigError(f"method.rescale={self.rescale!r}: must be null or a number in [0, 1]")
        _choice("method.router", self.router, self.ROUTERS)


METHODS: dict[str, type[MethodConfig]] = {
    "plain": PlainConfig,
    "jrt": JRTConfig,
    "notebank": NoteBankConfig,
}


@dataclass
class BenchConfig:
    name: str = "ruler"


RULER_TASKS = (
    "niah_single_1",
    "niah_single_2",
    "niah_single_3",
    "niah_multikey_1",
    "niah_multikey_2",
    "niah_multikey_3",
    "niah_multivalue",
    "niah_multiquery",
    "vt",
    "cwe",
    "fwe",
    "qa_1",
    "qa_2",
)


@dataclass
class RulerConfig(BenchConfig):
    """RULER NIAH, generated locally as a pure function of (task, length, seed, tokenizer)."""

    name: str = "ruler"
    tasks: list[str] = field(default_factory=lambda: ["niah_single_1"])
    lengths: list[int] = field(default_factory=lambda: [4096])  # target tokens incl. generation
    num_samples: int = 100  # examples per task and length
    seed: int = 42  # RULER's default random seed
    essay_path: Optional[str] = None  # Paul Graham essays: local .json {"text": ...} or .txt
    cache_dir: str = "outputs/cache/ruler"  # generated examples, keyed by all inputs
    max_new_tokens: Optional[int] = None  # override RULER's tokens_to_generate (128 for NIAH)
    squad_path: Optional[str] = None  # qa_1: SQuAD v2.0 dev-v2.0.json; null = hub when online
    hotpotqa_path: Optional[str] = None  # qa_2: hotpot_dev_distractor_v1.json; null = hub when online
    cwe_words_path: Optional[str] = None  # cwe beyond wonderwords' 8166 words: RULER's english_words.json

    def __post_init__(self) -> None:
        if not self.tasks:
            raise ConfigError(f"bench.tasks is empty: allowed values are {', '.join(RULER_TASKS)}")
        for t in self.tasks:
            _choice("bench.tasks", t, RULER_TASKS)
        if not self.lengths:
            raise ConfigError("bench.lengths is empty: give target lengths in tokens, e.g. [4096]")
        for n in self.lengths:
            _at_least("bench.lengths", n, 64)
        _at_least("bench.num_samples", self.num_samples, 1)
        if self.essay_path is not None and not Path(self.essay_path).expanduser().exists():
            raise ConfigError(f"bench.essay_path={self.essay_path!r}: no such file")
        if self.max_new_tokens is not None:
            _at_least("bench.max_new_tokens", self.max_new_tokens, 1)


BENCHES: dict[str, type[BenchConfig]] = {"ruler": RulerConfig}


def _tasks(path: str, tasks: list, allowed: tuple) -> None:
    if not tasks:
        raise ConfigError(f"{path} is empty: allowed values are {', '.join(allowed)}")
    for t in tasks:
        _choice(path, t, allowed)


def _optional_at_least(path: str, value: Any, low: float) -> None:
    if value is not None:
        _at_least(path, value, low)


LONGBENCH_TASKS = (
    "narrativeqa",
    "qasper",
    "multifieldqa_en",
    "hotpotqa",
    "2wikimqa",
    "musique",
    "gov_report",
    "qmsum",
    "multi_news",
    "trec",
    "triviaqa",
    "samsum",
)


@dataclass
class LongBenchConfig(BenchConfig):
    """LongBench v1, the 12 English subsets of the NoteBank paper's Table 1."""

    name: str = "longbench"
    tasks: list[str] = field(default_factory=lambda: list(LONGBENCH_TASKS))
    num_samples: Optional[int] = 30  # first rows of each subset (the paper's 30 fixed examples); null = all
    max_length: Optional[int] = None  # middle-truncate context + question to this many tokens; null = never
    max_new_tokens: Optional[int] = None  # override LongBench's per-subset dataset2maxlen
    data_path: Optional[str] = None  # folder of <subset>.jsonl (the official data.zip layout) or one .jsonl
    cache_dir: str = "outputs/cache/data/longbench"
    hub_id: str = "THUDM/LongBench"

    def __post_init__(self) -> None:
        _tasks("bench.tasks", self.tasks, LONGBENCH_TASKS)
        _optional_at_least("bench.num_samples", self.num_samples, 1)
        _optional_at_least("bench.max_length", self.max_length, 2)
        _optional_at_least("bench.max_new_tokens", self.max_new_tokens, 1)


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


MEMORYAGENTBENCH_TASKS = (
    "factconsolidation_sh_6k",
    "factconsolidation_sh_32k",
    "factconsolidation_sh_262k",
    "factconsolidation_mh_6k",
    "factconsolidation_mh_32k",
    "factconsolidation_mh_262k",
    "eventqa_65536",
    "eventqa_131072",
    "eventqa_full",
    "ruler_qa1_197K",
    "ruler_qa2_421K",
)


@dataclass
class MemoryAgentBenchConfig(BenchConfig):
    """MemoryAgentBench as its long-context agent sees it; the NoteBank paper's 11 configurations."""

    name: str = "memoryagentbench"
    tasks: list[str] = field(default_factory=lambda: list(MEMORYAGENTBENCH_TASKS))
    chunk_size: int = 4096  # tokens per memorised chunk (every data config's chunk_size)
    chunker: str = "official"  # official: nltk punkt + tiktoken o200k_base | approximate: regex + backbone tokens
    time_stamp: str = "2025-01-01 00:00:00"  # the agent stamps each chunk with the clock; fixed here
    input_length_limit: Optional[int] = None  # the agent's window; null = unlimited (no truncation)
    max_questions: Optional[int] = None  # first questions of each context; null = all
    data_path: Optional[str] = None  # folder of <source>.jsonl, or one .jsonl/.json of rows
    cache_dir: str = "outputs/cache/data/memoryagentbench"
    hub_id: str = "ai-hyz/MemoryAgentBench"

    def __post_init__(self) -> None:
        _tasks("bench.tasks", self.tasks, MEMORYAGENTBENCH_TASKS)
        _at_least("bench.chunk_size", self.chunk_size, 1)
        _choice("bench.chunker", self.chunker, ("official", "approximate"))
        _optional_at_least("bench.input_length_limit", self.input_length_limit, 1)
        _optional_at_least("bench.max_questions", self.max_questions, 1)


@dataclass
class QualityConfig(BenchConfig):
    """QuALITY multiple-choice QA over a story, one example per article (Titan-Llama paper)."""

    name: str = "quality"
    split: str = "dev"  # dev | train (test labels are not released)
    max_length: Optional[int] = None  # middle-truncate context + longest question; null = never
    max_new_tokens: int = 10  # ZeroSCROLLS' budget for QuALITY
    num_samples: Optional[int] = None  # first articles; null = all
    data_path: Optional[str] = None  # a QuALITY.v1.0.1.htmlstripped.<split> file or its folder
    cache_dir: str = "outputs/cache/data/quality"
    url: str = "https://raw.githubusercontent.com/nyu-mll/quality/main/data/v1.0.1/"

    def __post_init__(self) -> None:
        _choice("bench.split", self.split, ("dev", "train"))
        _optional_at_least("bench.max_length", self.max_length, 2)
        _at_least("bench.max_new_tokens", self.max_new_tokens, 1)
        _optional_at_least("bench.num_samples", self.num_samples, 1)


LONGHEALTH_TASKS = ("task1", "task2", "task3")


@dataclass
class LongHealthConfig(BenchConfig):
    """LongHealth multiple-choice QA over a patient's discharge letters (Titan-Llama paper)."""

    name: str = "longhealth"
    tasks: list[str] = field(default_factory=lambda: ["task1"])
    seed: int = 0  # document order and distractor sampling
    num_distractors: int = 10  # documents of other patients in tasks 2 and 3
    max_length: Optional[int] = None  # token budget for documents + question (official: 16000 - system); null = all
    max_new_tokens: int = 50
    num_samples: Optional[int] = None  # first patients; null = all 20
    data_path: Optional[str] = None  # benchmark_v5.json
    cache_dir: str = "outputs/cache/data/longhealth"
    url: str = "https://raw.githubusercontent.com/kbressem/LongHealth/main/data/benchmark_v5.json"

    def __post_init__(self) -> None:
        _tasks("bench.tasks", self.tasks, LONGHEALTH_TASKS)
        _at_least("bench.num_distractors", self.num_distractors, 0)
        _optional_at_least("bench.max_length", self.max_length, 1)
        _at_least("bench.max_new_tokens", self.max_new_tokens, 1)
        _optional_at_least("bench.num_samples", self.num_samples, 1)


BENCHES.update({
    "longbench": LongBenchConfig,
    "longbench_v2": LongBenchV2Config,
    "memoryagentbench": MemoryAgentBenchConfig,
    "quality": QualityConfig,
    "longhealth": LongHealthConfig,
})


@dataclass
class LoggerConfig:
    """Where results go besides the local run folder (always written)."""

    name: str = "none"  # none | wandb
    project: str = "memexp"
    entity: Optional[str] = None
    mode: str = "auto"  # auto = online with credentials, else offline
    group: Optional[str] = None  # default: the sweep (multirun) folder name
    tags: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        _choice("logger.name", self.name, ("none", "wandb"))
        _choice("logger.mode", self.mode, ("auto", "online", "offline", "disabled"))


@dataclass
class RunConfig:
    backbone: BackboneConfig
    method: MethodConfig
    bench: BenchConfig
    logger: LoggerConfig
    kernels: str = "auto"  # auto | triton | torch
    output_dir: str = "outputs/runs"
    threads: Optional[int] = None  # torch CPU threads; null = torch's default
    progress: bool = True
    max_examples: Optional[int] = None  # stop after this many examples (smoke runs)

    def __post_init__(self) -> None:
        _choice("kernels", self.kernels, ("auto", "triton", "torch"))
        if self.threads is not None:
            _at_least("threads", self.threads, 1)
        if self.max_examples is not None:
            _at_least("max_examples", self.max_examples, 1)


def _build(schema: type, node: Any, path: str):
    """Merge a config node into its dataclass schema and instantiate it (runs the checks)."""
    if not isinstance(node, DictConfig):
        raise ConfigError(f"{path}: expected a group of fields, got {node!r}")
    known = {f.name for f in fields(schema)}
    for key in node.keys():
        if key not in known:
            raise ConfigError(f"{path}.{key}: unknown field; allowed fields are {', '.join(sorted(known))}")
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), node)
        return OmegaConf.to_object(merged)
    except ConfigError:
        raise
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", None) or ""
        field_path = f"{path}.{key}" if key and not key.startswith(path) else (key or path)
        msg = str(e).splitlines()[0]
        raise ConfigError(f"{field_path}: {msg}") from None


def _pick(registry: dict[str, type], node: Any, group: str) -> type:
    name = node.get("name") if isinstance(node, DictConfig) else None
    if name not in registry:
        raise ConfigError(f"{group}.name={name!r}: allowed values are {', '.join(registry)}")
    return registry[name]


def validate(cfg: DictConfig) -> RunConfig:
    """The composed config as typed dataclasses, or ConfigError naming the bad field."""
    for group in ("backbone", "method", "bench", "logger"):
        if group not in cfg or cfg[group] is None:
            raise ConfigError(f"{group} is missing: choose one with {group}=<option> (see `python -m memexp ls`)")
    top = {k: cfg[k] for k in cfg if k not in ("backbone", "method", "bench", "logger", "hydra")}
    run_fields = {f.name for f in fields(RunConfig)}
    for key in top:
        if key not in run_fields:
            raise ConfigError(f"{key}: unknown field; allowed top-level fields are {', '.join(sorted(run_fields))}")
    backbone = _build(BackboneConfig, cfg.backbone, "backbone")
    method = _build(_pick(METHODS, cfg.method, "method"), cfg.method, "method")
    bench = _build(_pick(BENCHES, cfg.bench, "bench"), cfg.bench, "bench")
    logger = _build(LoggerConfig, cfg.logger, "logger")
    if isinstance(method, NoteBankConfig) and backbone.arch == "llama":
        raise ConfigError(f"method=notebank: backbone={backbone.name} is an attention backbone (arch llama) with no "
                          f"recurrent channels to write or address notes; allowed methods here are plain, jrt")
    try:
        rest = OmegaConf.to_object(OmegaConf.merge(OmegaConf.create({k: v for k, v in top.items()})))
    except OmegaConfBaseException as e:
        raise ConfigError(str(e).splitlines()[0]) from None
    for key, kind in (("kernels", str), ("output_dir", str), ("progress", bool)):
        if key in rest and not isinstance(rest[key], kind):
            raise ConfigError(f"{key}={rest[key]!r}: expected {kind.__name__}")
    for key in ("threads", "max_examples"):
        if key in rest and rest[key] is not None and (not isinstance(rest[key], int) or isinstance(rest[key], bool)):
            raise ConfigError(f"{key}={rest[key]!r}: expected an integer or null")
    return RunConfig(backbone=backbone, method=method, bench=bench, logger=logger, **rest)
