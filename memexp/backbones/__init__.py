"""Backbones behind the native memory interface, built by name from `conf/backbone/`.

    from memexp.backbones import load_backbone
    bb = load_backbone("tiny_gdn_random")        # a YAML in conf/backbone/
    bb = load_backbone({"arch": "gdn", "pretrained": "/path/to/dir"})

Each arch is an entry of `memexp.core.registry.ARCHS`, registered from its package's `__init__`:
a lazy `module:function` that takes a `BackboneConfig` and returns a `Backbone`, and the
capabilities validation reads (`recurrent_channels`, ...). An outside package plugs in an
architecture with one `register` call. The interface names load lazily, so that naming an
architecture while validating a config imports no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memexp.core.paths import CONF_DIR
from memexp.core.registry import ARCHS
from memexp.core.schema import BackboneConfig, ConfigError

if TYPE_CHECKING:
    from memexp.backbones.base import Backbone

BACKBONE_OPTIONS = CONF_DIR / "backbone"


def register(arch: str, target: Any, schema: Any = None, **meta: Any) -> None:
    """Make `backbone.arch=<arch>` runnable: `target` builds a Backbone from a BackboneConfig
    ("module:function" or the function); meta flags such as `recurrent_channels=True` are what
    validation asks of it (see `memexp.core.registry.ARCHS`)."""
    ARCHS.register(arch, target, schema, **meta)


def backbone_names() -> list[str]:
    """The YAML names in conf/backbone/."""
    return sorted(p.stem for p in BACKBONE_OPTIONS.glob("*.yaml"))


def backbone_config(spec: BackboneConfig | dict | str) -> BackboneConfig:
    """A validated BackboneConfig from itself, a dict of its fields, or a conf/backbone name."""
    from omegaconf import OmegaConf

    from memexp.core.schema import _build

    if isinstance(spec, BackboneConfig):
        return spec
    if isinstance(spec, str):
        path = BACKBONE_OPTIONS / f"{spec}.yaml"
        if not path.is_file():
            raise ConfigError(f"backbone={spec!r}: no {path.name} in {BACKBONE_OPTIONS}; allowed values are "
                              f"{', '.join(backbone_names())}")
        spec = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    if not isinstance(spec, dict):
        raise ConfigError(f"backbone: expected a BackboneConfig, a dict or a name, got {type(spec).__name__}")
    return _build(BackboneConfig, OmegaConf.create(spec), "backbone")


def load_backbone(spec: BackboneConfig | dict | str) -> Backbone:
    """Build the backbone described by `spec` (see `backbone_config`)."""
    cfg = backbone_config(spec)
    entry = ARCHS.get(cfg.arch)  # BackboneConfig has checked the name
    try:
        build = entry.load()
    except ModuleNotFoundError as e:
        module_name = entry.target.partition(":")[0] if isinstance(entry.target, str) else None
        if module_name is None or e.name != module_name:
            raise
        from memexp.backbones.loading import BackboneLoadError

        raise BackboneLoadError(f"backbone.arch={cfg.arch!r}: its implementation {module_name} is not available") from None
    return build(cfg)


__all__ = [
    "backbone_config",
    "backbone_names",
    "load_backbone",
    "register",
]
