"""Checks of a validated run against this machine and across fields, before any model loads.

`memexp.core.schema.validate` checks each value on its own (no torch there, so validating loads no
model code); these checks need the machine (is there a GPU? can the output folder be written?)
or relate fields of different axes (a chunk longer than every context of the run). Each raises a
ConfigError of one line naming the field and what to do instead.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from memexp.core.registry import METHODS, load_object
from memexp.core.schema import ConfigError, RunConfig
from memexp.methods.read_adapter import check_backbone

# method fields measured in context tokens: longer than every context, they cannot do what they say
CONTEXT_FIELDS = ("chunk_size", "span_budget", "window")
HEAD_FIELDS = ("num_attention_heads", "num_heads")


def check_run(cfg: RunConfig) -> None:
    """Everything `memexp run` checks before any model loads (beyond `memexp.core.schema.validate`)."""
    check_model_config(cfg)
    check_writable("output_dir", cfg.output_dir)
    check_cache_writable(cfg.bench, cfg.paths.root)
    check_context_fields(cfg)
    check_metric(cfg)


def check_values(cfg: RunConfig) -> None:
    """The checks of `check_run` that read neither files nor the machine (`--cfg`, `--info`: a preset
    is inspected before its checkpoints exist)."""
    check_model_shape(cfg.backbone.model)
    check_context_fields(cfg)
    check_metric(cfg)


def check_model_config(cfg: RunConfig) -> None:
    """What every command that loads the backbone checks first (run, latency)."""
    check_machine(cfg)
    check_model_shape(cfg.backbone.model)
    # a read adapter trained on another backbone stops here, before the model loads
    check_backbone(getattr(cfg.method, "adapter", None), cfg.backbone)
    check_method_layers(cfg)


def check_method_layers(cfg: RunConfig) -> None:
    """The method's own check of the backbone's shapes, read from its config (no weights), when it
    registered one (`backbone_check`: NoteBank's method.layers names recurrent layers of this backbone)."""
    check = METHODS.get(cfg.method.name).meta.get("backbone_check")
    if check is not None:
        load_object(check)(cfg.method, cfg.backbone)


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def check_machine(cfg: RunConfig) -> None:
    on_cpu = cfg.backbone.device == "cpu" or (cfg.backbone.device == "auto" and not _cuda())
    if cfg.kernels == "triton" and on_cpu:
        raise ConfigError("kernels=triton: the Triton kernels need a CUDA GPU and this run is on the CPU; "
                          "use kernels=auto (reference ops on CPU) or kernels=torch")
    if cfg.backbone.device == "cuda" and not _cuda():
        raise ConfigError("backbone.device=cuda: no CUDA GPU is visible here; use backbone.device=auto or cpu")
    if cfg.backbone.dtype == "float16" and on_cpu:
        raise ConfigError("backbone.dtype=float16: not supported on the CPU (ops missing or very slow); "
                          "use backbone.dtype=auto (float32 on CPU) or bfloat16")


def check_writable(field: str, folder: str) -> None:
    """`folder` exists (created here if need be) and takes a new file: asking the file system is the
    only sure test (permissions, a read-only mount, root on a pseudo file system all differ)."""
    path = Path(folder).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".memexp-write-test-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise ConfigError(f"{field}={folder}: cannot write there ({e.strerror or e}); choose a writable "
                          f"{field}") from None


def check_cache_writable(bench, root: str = ".") -> None:
    """The benchmark's cache_dir (a relative one lies under paths.root, memexp.core.paths) takes new
    files, unless it holds a finished download (only read)."""
    cache = getattr(bench, "cache_dir", None)
    if cache is None:
        return
    path = Path(cache).expanduser()
    path = path if path.is_absolute() else Path(root).expanduser() / path
    if not (path / ".complete").exists():
        check_writable("bench.cache_dir", str(path))


def longest_context(bench) -> tuple[int, str] | None:
    """(tokens, the field that sets it) of the longest context the benchmark builds, when known."""
    lengths = getattr(bench, "lengths", None)
    if lengths:
        return max(lengths), "bench.lengths"
    max_length = getattr(bench, "max_length", None)
    if isinstance(max_length, int):
        return max_length, "bench.max_length"
    return None


def check_context_fields(cfg: RunConfig) -> None:
    longest = longest_context(cfg.bench)
    if longest is None:
        return
    tokens, source = longest
    for name in CONTEXT_FIELDS:
        value = getattr(cfg.method, name, None)
        if isinstance(value, int) and value > tokens:
            raise ConfigError(f"method.{name}={value}: longer than every context of this run ({source}: at most "
                              f"{tokens} tokens), so it cannot act; choose method.{name} <= {tokens}")
    check_replay_budget(cfg.method, tokens, source)


def check_replay_budget(method, tokens: int, source: str) -> None:
    """Notes replayed per question (R) beyond the notes the longest context can write (W per
    chunk of C tokens) are refused, as an oversized chunk or span budget is: R would not be the R run."""
    replay, write, chunk = (getattr(method, n, None) for n in ("replay_budget", "write_budget", "chunk_size"))
    if not all(isinstance(v, int) for v in (replay, write, chunk)):
        return
    most = -(-tokens // chunk) * write
    if replay > most:
        raise ConfigError(f"method.replay_budget={replay}: more notes than this run can write ({source}: at most "
                          f"{tokens} tokens, {-(-tokens // chunk)} chunks of method.chunk_size={chunk} x "
                          f"method.write_budget={write} = {most} notes); choose method.replay_budget <= {most}")


def check_model_shape(model: dict, where: str = "backbone.model") -> None:
    """A random-init `backbone.model` that would build, run and score 0 (or fail deep in torch):
    a size below 1 (every integer field but the token ids is a count or a size), or heads that
    cannot split its width."""
    for key, value in model.items():
        if isinstance(value, int) and not isinstance(value, bool) and not key.endswith("_token_id") and value < 1:
            raise ConfigError(f"{where}.{key}={value}: must be an integer >= 1 (a size or a count)")
    heads_key = next((k for k in HEAD_FIELDS if k in model), None)
    width, heads = model.get("hidden_size"), model.get(heads_key) if heads_key else None
    if isinstance(width, int) and isinstance(heads, int) and heads > 0 and model.get("head_dim") is None \
            and width % heads:
        raise ConfigError(f"{where}.{heads_key}={heads}: does not divide {where}.hidden_size={width}; "
                          f"choose a divisor of {width} (or set {where}.head_dim)")
    kv = model.get("num_key_value_heads")
    if isinstance(kv, int) and isinstance(heads, int) and kv > 0 and heads % kv:
        raise ConfigError(f"{where}.num_key_value_heads={kv}: does not divide {where}.{heads_key}="
                          f"{heads}; choose a divisor of {heads}")


# summary.json values a sweep may optimise (memexp.run.runner._summary): numbers, and tables indexed
# by task and/or length; `aggregate/<name>` are the benchmark's own, known only once it has run
SUMMARY_NUMBERS = ("overall", "num_questions", "num_examples", "added_flops_ratio", "mean_storage_bytes")
SUMMARY_TABLES = {"by_length": ("lengths",), "by_task": ("tasks",), "scores": ("tasks", "lengths"),
                  "counts": ("tasks", "lengths")}


def check_metric(cfg: RunConfig) -> None:
    """`metric` names one number the run's summary will hold; a length or task it names is one
    the run has (known for benchmarks with `lengths` / `tasks` fields)."""
    head, *rest = cfg.metric.split("/")
    if head == "aggregate" and len(rest) == 1:
        return
    if not ((head in SUMMARY_NUMBERS and not rest) or (head in SUMMARY_TABLES and len(rest) == len(SUMMARY_TABLES[head]))):
        raise ConfigError(f"metric={cfg.metric}: not a number of the summary; allowed are "
                          f"{', '.join(SUMMARY_NUMBERS)}, by_length/<length>, by_task/<task>, "
                          f"scores/<task>/<length>, counts/<task>/<length>, aggregate/<name>")
    for part, axis in zip(rest, SUMMARY_TABLES.get(head, ())):
        allowed = [str(v) for v in getattr(cfg.bench, axis, None) or ()]
        if allowed and part not in allowed:
            raise ConfigError(f"metric={cfg.metric}: {part!r} is not one of this run's bench.{axis} "
                              f"({', '.join(allowed)})")


def check_recipe(recipe) -> None:
    """A training recipe's fields that its schema leaves to every recipe alike, checked before any
    step runs (a bad one would otherwise stop the recipe after minutes of training, or deep in torch)."""
    for name, low in (("threads", 1), ("log_every", 1), ("eval_length", 64), ("eval_samples", 0)):
        value = getattr(recipe, name, None)
        if isinstance(value, int) and value < low:
            raise ConfigError(f"recipe.{name}={value}: must be an integer >= {low}")
    init_from = getattr(recipe, "init_from", None)
    if init_from and not Path(init_from).expanduser().exists():
        raise ConfigError(f"recipe.init_from={init_from!r}: no such checkpoint folder")
    if isinstance(getattr(recipe, "model", None), dict):
        check_model_shape(recipe.model, "recipe.model")
    if getattr(recipe, "output", None) and not getattr(recipe, "replace_assets", False):
        check_writable("recipe.output", recipe.output)


SLURM_LAUNCHERS = ("slurm", "slurm_local")


def check_launcher_environment(overrides: list[str]) -> None:
    """hydra/launcher=slurm needs SLURM on this machine (sbatch), not only the plugin."""
    for o in overrides:
        key, _, option = o.partition("=")
        if key.lstrip("+~") == "hydra/launcher" and option in SLURM_LAUNCHERS and shutil.which("sbatch") is None:
            raise ConfigError(f"hydra/launcher={option}: SLURM is not available here (no sbatch on PATH); run from a "
                              "SLURM login node, or use hydra/launcher=processes for local parallel jobs")
