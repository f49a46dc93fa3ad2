"""Backbones behind the native memory interface, built by name from `conf/backbone/`.

    from memexp.backbones import load_backbone
    bb = load_backbone("tiny_gdn_random")        # a YAML in conf/backbone/
    bb = load_backbone({"arch": "gdn", "pretrained": "/path/to/dir"})

Each arch maps to a lazy import string `module:function`; the function takes a
`BackboneConfig` and returns a `Backbone`. A new backbone plugs in by adding its entry
here (or calling `register`).
"""

from __future__ import annotations

import importlib
from pathlib import Path

from memexp.backbones.base import Backbone, Channel, Observer, State, Tokenizer
from memexp.backbones.loading import BackboneLoadError
from memexp.config import BackboneConfig, ConfigError
from memexp.registry import ARCHS

CONF_DIR = Path(__file__).resolve().parents[2] / "conf" / "backbone"


def register(arch: str, target: str, schema=None, **meta) -> None:
    """Map `arch` to a builder given as 'module:function' (see `memexp.registry.ARCHS`)."""
    ARCHS.register(arch, target, schema, **meta)


def backbone_names() -> list[str]:
    """The YAML names in conf/backbone/."""
    return sorted(p.stem for p in CONF_DIR.glob("*.yaml"))


def backbone_config(spec: BackboneConfig | dict | str) -> BackboneConfig:
    """A validated BackboneConfig from itself, a dict of its fields, or a conf/backbone name."""
    from omegaconf import OmegaConf

    from memexp.config import _build

    if isinstance(spec, BackboneConfig):
        return spec
    if isinstance(spec, str):
        path = CONF_DIR / f"{spec}.yaml"
        if not path.is_file():
            raise ConfigError(f"backbone={spec!r}: no {path.name} in {CONF_DIR}; allowed values are "
                              f"{', '.join(backbone_names())}")
        spec = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    if not isinstance(spec, dict):
        raise ConfigError(f"backbone: expected a BackboneConfig, a dict or a name, got {type(spec).__name__}")
    return _build(BackboneConfig, OmegaConf.create(spec), "backbone")


def load_backbone(spec: BackboneConfig | dict | str) -> Backbone:
    """Build the backbone described by `spec` (see `backbone_config`)."""
    cfg = backbone_config(spec)
    if cfg.arch not in ARCHS:
        raise ConfigError(ARCHS.unknown_message(cfg.arch))
    module_name, func = ARCHS.get(cfg.arch).target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name != module_name:
            raise
        raise BackboneLoadError(f"backbone.arch={cfg.arch!r}: its implementation {module_name} is not available") from None
    return getattr(module, func)(cfg)


__all__ = [
    "ARCHS",
    "Backbone",
    "BackboneConfig",
    "BackboneLoadError",
    "Channel",
    "Observer",
    "State",
    "Tokenizer",
    "backbone_config",
    "backbone_names",
    "load_backbone",
    "register",
]
