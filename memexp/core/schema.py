"""The run's schema (`RunConfig`), the backbone and logger schemas, cross-axis validation and errors.

Method and benchmark schemas live beside their implementations and are registered there
(memexp.core.registry METHODS / BENCHES, schema + lazy target); `validate(cfg)` picks each group's schema
from its registry, turns the composed Hydra config into dataclasses and checks what one axis needs
of another (capabilities from registry metadata). Any wrong value raises `ConfigError` with one line
naming the field and what is allowed. `store_schemas()` puts every schema in Hydra's ConfigStore
(schema/backbone, schema/logger, schema/method/<name>, schema/bench/<name>), which conf/ YAMLs name
in their defaults list.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from memexp.core.registry import ARCHS, BENCHES, METHODS, Registry


class ConfigError(ValueError):
    """A config value is invalid; the message is one line naming the field."""


ASSETS_DIR = Path(__file__).resolve().parents[1] / "assets"


def asset_path(name: str) -> str:
    """Absolute path of something shipped in memexp/assets, whatever the working directory:
    YAML writes it `${memexp_asset:tiny_gdn}`."""
    return str(ASSETS_DIR / name)


# an absolute path into an installed memexp's assets folder (this install's or another machine's)
_ASSET_PATH = re.compile(r"^/(?:.*/)?memexp/assets/(.+)$")


def portable_assets(value: Any) -> Any:
    """`value` (nested dicts, lists) with every absolute path into memexp's assets folder written
    `${memexp_asset:<name>}`, the form a YAML uses and asset_path resolves: records and report
    labels then read the same wherever memexp is installed."""
    if isinstance(value, dict):
        return {k: portable_assets(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [portable_assets(v) for v in value]
    if isinstance(value, str):
        match = _ASSET_PATH.match(value)
        return f"${{memexp_asset:{match.group(1).rstrip('/')}}}" if match else value
    return value


if not OmegaConf.has_resolver("memexp_asset"):
    OmegaConf.register_new_resolver("memexp_asset", asset_path)


# Fields that name a file or folder: `~` and $VARIABLES in them expand wherever they are set (command
# line, a user's YAML, an interpolation such as output_dir: ${paths.runs}), so a run never writes
# into a literal `./~/` or `./$HOME/` folder. Every field of `paths` is one; `*_path` fields too.
PATH_FIELD_NAMES = ("output_dir", "cache_dir", "pretrained", "tokenizer", "adapter", "init_from", "output")
_UNSET_VARIABLE = re.compile(r"\$(\w+|\{[^}]*\})")


def is_path_field(group: str, name: str) -> bool:
    return group == "paths" or name in PATH_FIELD_NAMES or name.endswith("_path")


def expand_path(field_path: str, value: Any) -> Any:
    """`value` with `~` and environment variables expanded; a variable that is not set stops the run
    (it would otherwise become a folder named after it)."""
    if not isinstance(value, str):
        return value
    expanded = os.path.expanduser(os.path.expandvars(value))
    unset = _UNSET_VARIABLE.search(expanded)
    if unset:
        name = unset.group(1).strip("{}")
        raise ConfigError(f"{field_path}={value!r}: the environment variable {name} is not set; set it, or "
                          f"write the path out")
    return expanded


if not OmegaConf.has_resolver("memexp_path"):
    # hydra.sweep.dir: ${memexp_path:${paths.multirun}}/...
    OmegaConf.register_new_resolver("memexp_path", lambda value: expand_path("paths.multirun", value))


def _choice(path: str, value: Any, allowed: tuple) -> None:
    if value not in allowed:
        raise ConfigError(f"{path}={value!r}: allowed values are {', '.join(map(str, allowed))}")


def _looks_like_path(value: str) -> bool:
    return value.startswith(("/", "./", "../", "~"))


# Whether validating reads the file system. `--cfg`, `--info` and `-sc` show a preset before its
# checkpoints or data exist (downloading or converting them takes hours), so they validate with
# `without_file_checks()`; a run validates again with the checks on before anything loads.
_CHECK_FILES: ContextVar[bool] = ContextVar("memexp_check_files", default=True)


@contextmanager
def without_file_checks():
    """Validate values only: no field is checked against files on this machine."""
    token = _CHECK_FILES.set(False)
    try:
        yield
    finally:
        _CHECK_FILES.reset(token)


def files_checked() -> bool:
    """False inside `without_file_checks()`: a schema's checks of paths on disk are skipped there."""
    return _CHECK_FILES.get()


def _existing_path(path: str, value: Optional[str]) -> None:
    """Local paths must exist; hub ids (org/name) are checked when the model loads."""
    if not files_checked():
        return
    if value is not None and _looks_like_path(value) and not Path(value).expanduser().exists():
        raise ConfigError(f"{path}={value!r}: no such file or directory")


def _at_least(path: str, value: Any, low: float, kind: str = "an integer") -> None:
    if value is None or value < low:
        raise ConfigError(f"{path}={value!r}: must be {kind} >= {low}")


def _tasks(path: str, tasks: list, allowed: tuple) -> None:
    if not tasks:
        raise ConfigError(f"{path} is empty: allowed values are {', '.join(allowed)}")
    for t in tasks:
        _choice(path, t, allowed)
    _distinct(path, tasks)


def _distinct(path: str, values: list) -> None:
    """An axis of the run is a set: a value listed twice would run its questions twice under the
    same record keys, and the folder would never read as complete again."""
    seen = set()
    for v in values:
        if v in seen:
            listed = ", ".join(map(str, values))
            raise ConfigError(f"{path}=[{listed}]: {v} is listed twice; list each value once")
        seen.add(v)


def _optional_at_least(path: str, value: Any, low: float) -> None:
    if value is not None:
        _at_least(path, value, low)


@dataclass
class BackboneConfig:
    """A pretrained model. `pretrained` is a hub id or a local directory; with
    `pretrained=null` the model is built with random weights from `model` (tests)."""

    name: str = "tiny_gdn"  # the option's name (the conf/backbone file); part of the run folder's path
    arch: str = "gdn"  # a name in memexp.core.registry.ARCHS: which implementation reads the checkpoint
    pretrained: Optional[str] = None  # hub id or local directory of the checkpoint; null = random weights from `model`
    revision: Optional[str] = None  # hub revision (commit or tag)
    tokenizer: Optional[str] = None  # tokenizer source when not beside the weights
    dtype: str = "auto"  # auto = bfloat16 on CUDA, float32 on CPU
    device: str = "auto"  # auto = cuda when available
    prefill_chunk: int = 2048  # tokens per bounded forward chunk (memory stays bounded)
    window: Optional[int] = None  # sliding attention window (attention backbones)
    chat: bool = False  # wrap context + question in the checkpoint's chat template (instruct models)
    model: dict = field(default_factory=dict)  # architecture fields for random init
    seed: int = 0  # random-init seed

    def __post_init__(self) -> None:
        if self.arch not in ARCHS:
            raise ConfigError(ARCHS.unknown_message(self.arch))
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
        if self.revision is not None and (self.pretrained is None or _looks_like_path(self.pretrained)):
            where = "a random-init model" if self.pretrained is None else f"the local folder {self.pretrained}"
            raise ConfigError(f"backbone.revision={self.revision!r}: only a hub id has revisions and "
                              f"backbone.pretrained is {where}; drop backbone.revision (set it to null)")


@dataclass
class MethodConfig:
    """The base of every method schema: `name` picks the entry in memexp.core.registry.METHODS."""

    name: str = "plain"  # a name in memexp.core.registry.METHODS: which method runs (each schema sets its own)


def parse_shard(value: Optional[str]) -> Optional[tuple[int, int]]:
    """`bench.shard="i/n"` as (i, n) with 0 <= i < n; None for the whole benchmark."""
    if value is None:
        return None
    parts = str(value).split("/")
    try:
        i, n = (int(p) for p in parts) if len(parts) == 2 else (None, None)
    except ValueError:
        i, n = None, None
    if i is None or n < 1 or not 0 <= i < n:
        raise ConfigError(f"bench.shard={value!r}: must be i/n with 0 <= i < n (e.g. 0/4), or null for all examples")
    return i, n


@dataclass
class BenchConfig:
    """The base of every benchmark schema: `name` picks the entry in memexp.core.registry.BENCHES.
    `shard="i/n"` runs the examples whose index in the benchmark's fixed order is i mod n
    (memexp.run.shards); each shard is its own run folder."""

    name: str = "ruler"  # a name in memexp.core.registry.BENCHES: which benchmark runs (each schema sets its own)
    shard: Optional[str] = None  # "i/n": run only the examples whose index is i mod n; null = all

    def __post_init__(self) -> None:
        parse_shard(self.shard)


@dataclass
class LoggerConfig:
    """Where results go besides the local run folder (always written)."""

    name: str = "none"  # none | wandb
    project: str = "memexp"  # the W&B project
    entity: Optional[str] = None  # the W&B entity (user or team); null = the account's default
    mode: str = "auto"  # auto = online with credentials, else offline
    group: Optional[str] = None  # default: the sweep (multirun) folder name
    # extra W&B tags besides backbone:, method:, bench: and the run's fields
    tags: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        _choice("logger.name", self.name, ("none", "wandb"))
        _choice("logger.mode", self.mode, ("auto", "online", "offline", "disabled"))


@dataclass
class PathsConfig:
    """Where memexp writes (conf/paths/default.yaml): one root, set by $MEMEXP_ROOT or
    paths.root=..., under which runs, sweeps and every relative bench.cache_dir live."""

    root: str = "."  # where memexp writes; $MEMEXP_ROOT, else the folder memexp starts in
    runs: str = "outputs/runs"  # the default output_dir
    multirun: str = "outputs/multirun"  # the default hydra.sweep.dir's parent

    def __post_init__(self) -> None:
        for name, example in (("root", "."), ("runs", "outputs/runs"), ("multirun", "outputs/multirun")):
            _nonempty_folder(f"paths.{name}", getattr(self, name), example)


def _nonempty_folder(path: str, value: str, example: str = "outputs/runs") -> None:
    """An empty folder name silently means the current folder (or, through `${paths.root}/...`,
    the file system's root): never what was meant."""
    if not str(value).strip():
        raise ConfigError(f"{path} is empty: give a folder (e.g. {path}={example}), or leave it out for the default")


@dataclass
class RunConfig:
    backbone: BackboneConfig
    method: MethodConfig
    bench: BenchConfig
    logger: LoggerConfig
    kernels: str = "auto"  # auto | triton | torch
    output_dir: str = "outputs/runs"  # where run folders are made (<output_dir>/<bench>/<backbone>/<method>/<hash>)
    threads: Optional[int] = None  # torch CPU threads; null = cores / parallel jobs of the launcher
    progress: bool = True  # a progress bar on the terminal
    max_examples: Optional[int] = None  # stop after this many examples (smoke runs)
    paths: PathsConfig = field(default_factory=PathsConfig)
    # the summary value a run returns to Hydra's sweeper (Optuna maximises it): a summary.json key,
    # or a path into it such as by_length/4096
    metric: str = "overall"
    wait_for_lock: bool = False  # another process holds the run folder: wait for it instead of stopping
    records_repair: bool = False  # move corrupt lines of records.jsonl to records.bad.jsonl and go on
    strict_data: bool = False  # a data row a loader would skip stops the run instead
    # a sweep's jobs that differ only in fields their method declares answer- or writer-side
    # (memexp.methods.read_identity) read each context once in one process (memexp.run.groups);
    # false: every job alone
    share_reads: bool = True
    # the most memories (archives beside the shared state) one group of a sweep holds at once; a
    # larger group is refused before any model loads
    share_reads_max_memories: int = 16

    def __post_init__(self) -> None:
        _choice("kernels", self.kernels, ("auto", "triton", "torch"))
        _at_least("share_reads_max_memories", self.share_reads_max_memories, 1)
        _nonempty_folder("output_dir", self.output_dir)
        if self.threads is not None:
            _at_least("threads", self.threads, 1)
        if self.max_examples is not None:
            _at_least("max_examples", self.max_examples, 1)


def _build(schema: type, node: Any, path: str):
    """Merge a config node into its dataclass schema and instantiate it (runs the checks)."""
    if not isinstance(node, DictConfig):
        raise ConfigError(f"{path}: expected a group of fields, got {node!r}")
    # a YAML read on its own (not composed) still carries the defaults list naming its schema
    node = OmegaConf.masked_copy(node, [k for k in node.keys() if k != "defaults"]) if "defaults" in node else node
    known = {f.name for f in fields(schema)}
    for key in node.keys():
        if key not in known:
            raise ConfigError(f"{path}.{key}: unknown field; allowed fields are {', '.join(sorted(known))}")
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), node)
        for f in fields(schema):
            if is_path_field(path, f.name) and isinstance(merged[f.name], str):
                merged[f.name] = expand_path(f"{path}.{f.name}", merged[f.name])
        return OmegaConf.to_object(merged)
    except ConfigError:
        raise
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", None) or ""
        field_path = f"{path}.{key}" if key and not key.startswith(path) else (key or path)
        msg = str(e).splitlines()[0]
        raise ConfigError(f"{field_path}: {msg}") from None


def _resolved(cfg: DictConfig, group: str) -> Any:
    """A group's values with interpolations into other groups resolved against the whole config
    (`method.adapter: outputs/adapters/${backbone.name}/notebank_r${method.replay_budget}`): a group
    is built on its own below, where only its own fields are in reach."""
    node = cfg[group]
    if not isinstance(node, DictConfig):
        return node
    try:
        return OmegaConf.create(OmegaConf.to_container(node, resolve=True))
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", None) or group
        raise ConfigError(f"{key}: {str(e).splitlines()[0]}") from None


def _pick(registry: Registry, node: Any) -> type:
    """The schema of the entry the group's `name` chooses."""
    name = node.get("name") if isinstance(node, DictConfig) else None
    if name not in registry:
        raise ConfigError(registry.unknown_message(name))
    return registry.get(name).load_schema()


# What a method may require of an architecture (`requires=` in METHODS, a true flag in the ARCHS
# entry's meta), and how its absence reads after "backbone=<name> ".
CAPABILITIES = {
    "recurrent_channels": "is an attention backbone (arch {arch}) with no recurrent channels to write or address notes",
    "adapters": "(arch {arch}) has no seams for low-rank adapters",
    "layer_replacement": "(arch {arch}) has no layers a method can replace",
    "softmax_attention": "(arch {arch}) has no softmax attention layers",
}


def _supports(arch: str, method: str) -> list[str]:
    """The capabilities `method` requires that `arch` lacks."""
    have = ARCHS.get(arch).meta
    return [c for c in METHODS.get(method).meta.get("requires", ()) if not have.get(c)]


def check_capabilities(backbone: BackboneConfig, method: MethodConfig) -> None:
    """The method runs on the backbone, or one line saying what is missing and which methods would run."""
    missing = _supports(backbone.arch, method.name)
    if missing:
        why = CAPABILITIES.get(missing[0], "(arch {arch}) lacks " + missing[0]).format(arch=backbone.arch)
        runnable = [e.name for e in METHODS if not _supports(backbone.arch, e.name)]
        raise ConfigError(f"method={method.name}: backbone={backbone.name} {why}; "
                          f"allowed methods here are {', '.join(runnable)}")


def check_local_paths(group: str, node: Any) -> None:
    """Every `<name>_path` field of a method or benchmark schema names a file or folder the run
    reads: one that does not exist stops the run here, before anything loads (and before a
    task that does not need it would silently ignore it)."""
    if not files_checked():
        return
    for f in fields(node):
        value = getattr(node, f.name)
        if f.name.endswith("_path") and isinstance(value, str) and not Path(value).expanduser().exists():
            raise ConfigError(f"{group}.{f.name}={value!r}: no such file or directory")


# groups whose files set fields of the whole run; without `# @package _global_` Hydra nests a file's
# fields under its group's name (experiment.bench.num_samples) and its defaults list's overrides fail
GLOBAL_GROUPS = ("experiment", "local", "hparams_search")


def global_package_message(group: str, option: str | None = None) -> str:
    name = f"{group}/{option}.yaml" if option else f"the {group} file"
    return (f"{group}: {name} does not start with `# @package _global_`; add it as the file's first line "
            f"(the {group} group's files set fields of the whole run, e.g. bench.num_samples)")


def validate(cfg: DictConfig) -> RunConfig:
    """The composed config as typed dataclasses, or ConfigError naming the bad field."""
    for group in ("backbone", "method", "bench", "logger"):
        if group not in cfg or cfg[group] is None:
            raise ConfigError(f"{group} is missing: choose one with {group}=<option> (see `python -m memexp ls`)")
    top = {k: cfg[k] for k in cfg if k not in ("backbone", "method", "bench", "logger", "hydra", "paths")}
    run_fields = {f.name for f in fields(RunConfig)}
    for key in top:
        if key in GLOBAL_GROUPS:
            raise ConfigError(global_package_message(key))
        if key not in run_fields:
            raise ConfigError(f"{key}: unknown field; allowed top-level fields are {', '.join(sorted(run_fields))}")
    backbone = _build(BackboneConfig, cfg.backbone, "backbone")
    method = _build(_pick(METHODS, cfg.method), _resolved(cfg, "method"), "method")
    bench = _build(_pick(BENCHES, cfg.bench), _resolved(cfg, "bench"), "bench")
    logger = _build(LoggerConfig, cfg.logger, "logger")
    paths = _build(PathsConfig, cfg.paths, "paths") if cfg.get("paths") is not None else PathsConfig()
    check_capabilities(backbone, method)
    for group, node in (("method", method), ("bench", bench)):
        check_local_paths(group, node)
    try:
        rest = OmegaConf.to_object(OmegaConf.merge(OmegaConf.create({k: v for k, v in top.items()})))
    except OmegaConfBaseException as e:
        raise ConfigError(str(e).splitlines()[0]) from None
    if isinstance(rest.get("output_dir"), int) and not isinstance(rest["output_dir"], bool):
        rest["output_dir"] = str(rest["output_dir"])  # output_dir=123: a folder named 123
    if isinstance(rest.get("output_dir"), (float, bool)):  # 1e3 reads as 1000.0: the folder name typed is lost
        raise ConfigError(f"output_dir={rest['output_dir']!r}: reads as a number, not a folder name; quote it, "
                          f"e.g. output_dir='1e3'")
    for key, kind in (("kernels", str), ("output_dir", str), ("progress", bool), ("metric", str),
                      ("wait_for_lock", bool), ("records_repair", bool), ("strict_data", bool),
                      ("share_reads", bool)):
        if key in rest and not isinstance(rest[key], kind):
            raise ConfigError(f"{key}={rest[key]!r}: expected {kind.__name__}")
    if isinstance(rest.get("output_dir"), str):
        rest["output_dir"] = expand_path("output_dir", rest["output_dir"])
    if "share_reads_max_memories" in rest and (not isinstance(rest["share_reads_max_memories"], int)
                                                or isinstance(rest["share_reads_max_memories"], bool)):
        raise ConfigError(f"share_reads_max_memories={rest['share_reads_max_memories']!r}: expected an integer")
    for key in ("threads", "max_examples"):
        if key in rest and rest[key] is not None and (not isinstance(rest[key], int) or isinstance(rest[key], bool)):
            raise ConfigError(f"{key}={rest[key]!r}: expected an integer or null")
    return RunConfig(backbone=backbone, method=method, bench=bench, logger=logger, paths=paths, **rest)


def store_schemas() -> None:
    """Every schema in Hydra's ConfigStore, so that a conf/ YAML names its schema in its defaults list
    (`- /schema/method/notebank@_here_`) and states only what differs. Entries an outside package
    registered before composing are stored too."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    store.store(group="schema", name="backbone", node=BackboneConfig)
    store.store(group="schema", name="logger", node=LoggerConfig)
    store.store(group="schema", name="paths", node=PathsConfig)
    for group, registry in (("method", METHODS), ("bench", BENCHES)):
        for entry in registry:
            if entry.schema is not None:
                store.store(group=f"schema/{group}", name=entry.name, node=schema_node(entry))


def schema_node(entry: Any) -> DictConfig:
    """An entry's schema with its defaults, named as registered (`name` picks the schema in `validate`)."""
    node = OmegaConf.structured(entry.load_schema())
    node.name = entry.name
    return node
