"""The one build path of every architecture: config -> model -> weights -> tokenizer -> backbone.

An architecture describes only what differs (`Architecture`): how its config class parses a
dict, its model and backbone classes, which parameters stay fp32, which checkpoint tensors
are ignored, and, when its checkpoints are not a plain config.json + weights directory, how
it reads one (`Checkpoint`). Its `model.py` keeps a `build(cfg)` that hands that description
to `build_backbone` (the registry targets `memexp.backbones.<pkg>.model:build`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from memexp.backbones.loading import (
    DECAY_GATES,
    WeightFiles,
    check_vocab,
    load_tokenizer,
    load_weights,
    new_model,
    read_chat_template,
    read_config,
    resolve_device,
    resolve_dtype,
    resolve_pretrained,
)
from memexp.backbones.stack import LayerStackBackbone
from memexp.core.schema import BackboneConfig, ConfigError


@dataclass(frozen=True)
class Checkpoint:
    """What an architecture read from a checkpoint directory."""

    conf: Any  # the architecture's config object
    weights: WeightFiles | dict[str, torch.Tensor]
    source: str  # named in load errors
    rename: Callable[[str], str] | None = None  # checkpoint tensor name -> module name


@dataclass(frozen=True)
class Architecture:
    """What one architecture supplies to `build_backbone`.

    `parse(values, strict, where)` is its config class's `from_dict`; `read(directory,
    overrides, parse)` reads a checkpoint (default: config.json parsed with `parse`, the
    weights beside it), where `overrides` are the `backbone.model` fields named in
    `overrides` (the only ones a checkpoint's architecture may be overridden with).
    """

    parse: Callable[..., Any]
    model: Callable[[Any], torch.nn.Module]
    backbone: type[LayerStackBackbone]
    keep_fp32: tuple[str, ...] = DECAY_GATES  # parameter names kept fp32 (see loading.place_model)
    ignore: tuple[str, ...] = ()  # regexes of checkpoint tensors the model does not use
    read: Callable[[Path, dict, Callable[..., Any]], Checkpoint] | None = None
    overrides: tuple[str, ...] = ()
    patterns: tuple[str, ...] | None = None  # hub file patterns to fetch (None: loading's default)
    chat_template: bool = False  # read the checkpoint's chat template (instruction-tuned releases)


def config_json_checkpoint(directory: Path, overrides: dict, parse: Callable[..., Any]) -> Checkpoint:
    """The default checkpoint: config.json (updated by `overrides`) and the weights beside it."""
    conf = parse({**read_config(directory), **overrides}, where=str(directory / "config.json"))
    return Checkpoint(conf, WeightFiles(directory), str(directory))


def checkpoint_overrides(cfg: BackboneConfig, allowed: tuple[str, ...]) -> dict:
    """The `backbone.model` fields given with a checkpoint; only `allowed` ones may be."""
    extra = sorted(set(cfg.model) - set(allowed))
    if extra and not allowed:
        raise ConfigError(f"backbone.model: fields are for random init only; the architecture of "
                          f"{cfg.pretrained!r} comes from its config.json (set backbone.model={{}})")
    if extra:
        raise ConfigError(f"backbone.model.{extra[0]}: with a checkpoint only {', '.join(allowed)} may be set; "
                          f"the rest of the architecture comes from the checkpoint")
    return dict(cfg.model)


def build_backbone(cfg: BackboneConfig, arch: Architecture) -> LayerStackBackbone:
    """A backbone from a checkpoint (`cfg.pretrained`) or random weights (`cfg.model`, the
    architecture's config fields, initialised from `cfg.seed`)."""
    device = resolve_device(cfg.device)
    dtype = resolve_dtype(cfg.dtype, device)
    template = None
    if cfg.pretrained is None:
        conf = arch.parse(cfg.model, strict=True, where="backbone.model")
        model = new_model(arch.model, conf, device, dtype, seed=cfg.seed, keep_fp32=arch.keep_fp32)
        tokenizer = load_tokenizer(cfg.tokenizer or "byte")
    else:
        overrides = checkpoint_overrides(cfg, arch.overrides)
        directory = resolve_pretrained(cfg.pretrained, cfg.revision,
                                       patterns=None if arch.patterns is None else list(arch.patterns))
        ckpt = (arch.read or config_json_checkpoint)(directory, overrides, arch.parse)
        conf = ckpt.conf
        model = new_model(arch.model, conf, device, dtype, keep_fp32=arch.keep_fp32)
        load_weights(model, ckpt.weights, ignore=arch.ignore, rename=ckpt.rename, source=ckpt.source)
        tokenizer = load_tokenizer(cfg.tokenizer, directory)
        if arch.chat_template:
            template = read_chat_template(directory, cfg.pretrained, cfg.revision)
    check_vocab(tokenizer, conf.vocab_size)
    backbone = arch.backbone(model, tokenizer, cfg.name, cfg.prefill_chunk, cfg.window)
    backbone.chat_template = template
    return backbone
