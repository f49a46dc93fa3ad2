"""Checks of a validated run against this machine and across fields, before any model loads.

`memexp.config.validate` checks each value on its own (no torch there, so validating loads no
model code); these checks need the machine (is there a GPU? can the output folder be written?)
or relate fields of different axes (a chunk longer than every context of the run). Each raises a
ConfigError of one line naming the field and what to do instead.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from memexp.config import ConfigError, RunConfig
from memexp.methods.read_adapter import check_backbone

# method fields measured in context tokens: longer than every context, they cannot do what they say
CONTEXT_FIELDS = ("chunk_size", "span_budget", "window")
HEAD_FIELDS = ("num_attention_heads", "num_heads")


def check_run(cfg: RunConfig) -> None:
    check_machine(cfg)
    check_writable("output_dir", cfg.output_dir)
    cache = getattr(cfg.bench, "cache_dir", None)
    if cache is not None and not (Path(cache).expanduser() / ".complete").exists():  # a finished download is only read
        check_writable("bench.cache_dir", cache)
    check_context_fields(cfg)
    check_model_shape(cfg.backbone.model)
    # a read adapter trained on another backbone stops here, before the model loads
    check_backbone(getattr(cfg.method, "adapter", None), cfg.backbone)


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


def check_model_shape(model: dict) -> None:
    """A random-init `backbone.model` whose heads cannot split its width (it would build, run and score 0)."""
    heads_key = next((k for k in HEAD_FIELDS if k in model), None)
    width, heads = model.get("hidden_size"), model.get(heads_key) if heads_key else None
    if isinstance(width, int) and isinstance(heads, int) and heads > 0 and model.get("head_dim") is None \
            and width % heads:
        raise ConfigError(f"backbone.model.{heads_key}={heads}: does not divide backbone.model.hidden_size={width}; "
                          f"choose a divisor of {width} (or set backbone.model.head_dim)")
    kv = model.get("num_key_value_heads")
    if isinstance(kv, int) and isinstance(heads, int) and kv > 0 and heads % kv:
        raise ConfigError(f"backbone.model.num_key_value_heads={kv}: does not divide backbone.model.{heads_key}="
                          f"{heads}; choose a divisor of {heads}")


def check_launcher_environment(overrides: list[str]) -> None:
    """hydra/launcher=slurm needs SLURM on this machine (sbatch), not only the plugin."""
    for o in overrides:
        key, _, option = o.partition("=")
        if key.lstrip("+~") == "hydra/launcher" and option == "slurm" and shutil.which("sbatch") is None:
            raise ConfigError("hydra/launcher=slurm: SLURM is not available here (no sbatch on PATH); run from a "
                              "SLURM login node, or use hydra/launcher=processes for local parallel jobs")
