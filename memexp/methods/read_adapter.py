"""Read adapters: `method.adapter=<dir>` on NoteBank (NB-LoRA) and Plain (the paper's Table 4
Plain + LoRA control), NoteBank paper Section 3.2 and App. B.4.

An adapter folder is what `python -m memexp train recipe=notebank_lora` writes: the LoRA spec and
tensors (memexp.adapters: adapter_config.json, adapter_model.safetensors) and `notebank_lora.json`,
which records the backbone it was trained on (name, arch, shape, and a local checkpoint's weights
fingerprint), r, alpha, layers, target projections, R and the recipe. A method holds an
`AdapterSlot`: `prepare(backbone)` loads the adapters onto that backbone, `on(backbone)` switches
them on for a block (the readout), and `record()` is what every answer record carries (path and
content hash).

The checks that need no model (the folder is an adapter folder; its backbone is the run's, by
name, arch and, for a local checkpoint, the shape in its config.json and its weights) run before
any model loads (`check_backbone`, from memexp.run.checks): adapters learned on one set of weights
mean nothing on another of the same shape (a retrained or replaced checkpoint). The same shape
check against the loaded model, and the module-by-module shape check of memexp.adapters, run in
`prepare`.

Light at import (no torch): the schemas call `check_adapter_field`.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Optional

from memexp.core.schema import ConfigError, files_checked

META_FILE = "notebank_lora.json"
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", META_FILE)
# Config fields that fix the shapes adapters depend on (each architecture names them its own way;
# only those a config has are recorded and compared).
SHAPE_FIELDS = ("hidden_size", "d_model", "num_hidden_layers", "n_layer", "num_heads", "num_attention_heads",
                "num_key_value_heads", "head_dim", "num_v_heads", "expand_v", "intermediate_size", "state_size",
                "n_groups", "expand", "vocab_size")


def check_adapter_field(value: Optional[str], where: str = "method.adapter") -> None:
    """null, or a folder holding the three adapter files (one-line ConfigError otherwise)."""
    if value is None:
        return
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}={value!r}: give the folder `memexp train recipe=notebank_lora` wrote, or null")
    if not files_checked():  # --cfg / --info: the folder is looked at when a run starts
        return
    folder = Path(value).expanduser()
    missing = [name for name in ADAPTER_FILES if not (folder / name).is_file()]
    if missing:
        raise ConfigError(f"{where}={value!r}: not an adapter folder (missing {', '.join(missing)}; "
                          f"`python -m memexp train recipe=notebank_lora` writes one)")


def read_meta(folder: str | Path) -> dict[str, Any]:
    return json.loads((Path(folder).expanduser() / META_FILE).read_text())


def model_shape(config: Any) -> dict[str, Any]:
    """The SHAPE_FIELDS a model config (a dataclass, an HF-style config or a dict) has."""
    values = config if isinstance(config, dict) else (config.to_dict() if hasattr(config, "to_dict") else vars(config))
    return {k: values[k] for k in SHAPE_FIELDS if values.get(k) is not None}


def mismatch(meta: dict, name: str, arch: str | None, shape: dict | None) -> str | None:
    """What differs between the adapter's backbone and this one (arch, name, then the first shape
    field both record), or None; `arch=None` / `shape=None` leave that comparison out."""
    trained = meta["backbone"]
    if arch is not None and trained["arch"] != arch:
        return f"arch: trained on {trained['arch']}, this backbone is {arch}"
    if trained["name"] != name:
        return f"backbone: trained on {trained['name']}, this run's is {name}"
    for key, value in (shape or {}).items():
        if key in trained["shape"] and trained["shape"][key] != value:
            return f"{key}: trained with {trained['shape'][key]}, this backbone has {value}"
    return None


def _local_shape(backbone_cfg: Any) -> dict | None:
    """The shape in a local checkpoint's config.json, or of a random-init `backbone.model`; None
    for a hub id (checked once the model is loaded)."""
    if backbone_cfg.pretrained is None:
        return model_shape(backbone_cfg.model)
    config = Path(backbone_cfg.pretrained).expanduser() / "config.json"
    return model_shape(json.loads(config.read_text())) if config.is_file() else None


def check_backbone(adapter: Optional[str], backbone_cfg: Any) -> None:
    """Before any model loads: the adapter was trained on this run's backbone, and for a local
    checkpoint on its weights, when the adapter records them (ConfigError)."""
    if adapter is None:
        return
    from memexp.core.file_digest import weights_fingerprint

    meta = read_meta(adapter)
    why = mismatch(meta, backbone_cfg.name, backbone_cfg.arch, _local_shape(backbone_cfg))
    trained = meta["backbone"].get("weights")
    if why is None and trained is not None:
        now = weights_fingerprint(backbone_cfg.pretrained)
        if now is not None and now != trained:
            why = f"weights: trained on checkpoint weights {trained}, this backbone's are {now}"
    if why:
        raise ConfigError(f"method.adapter={adapter}: made for another backbone ({why})")


class AdapterSlot:
    """The adapters of one method: none (`path=None`), or those in `path`, loaded by `prepare`."""

    def __init__(self, path: Optional[str]) -> None:
        self.path = None if path is None else str(Path(path).expanduser().resolve())
        self.adapters = None
        self.backbone = None
        self.hash: str | None = None

    def prepare(self, backbone) -> None:
        """Load the adapters onto `backbone` (off until `on`); one-line AdapterError on a mismatch."""
        if self.path is None:
            return
        from memexp.adapters import AdapterError, content_hash, load_adapters

        # the arch was compared before loading (check_backbone); a loaded backbone does not name it
        why = mismatch(read_meta(self.path), backbone.name, None, model_shape(backbone.config))
        if why:
            raise AdapterError(f"method.adapter={self.path}: made for another backbone ({why})")
        self.adapters = load_adapters(backbone, self.path)
        self.backbone = backbone
        self.hash = content_hash(self.adapters)

    def on(self, backbone) -> AbstractContextManager:
        """The adapters switched on for a block (nothing without adapters)."""
        if self.path is None:
            return nullcontext()
        if self.adapters is None or backbone is not self.backbone:
            raise RuntimeError(f"method.adapter={self.path}: call method.prepare(backbone) with this backbone "
                               f"before answering")
        return self.adapters.enabled()

    def record(self) -> dict[str, str]:
        """{"adapter": {"path", "hash"}} for an answer's stats; {} without adapters."""
        return {} if self.path is None else {"adapter": {"path": self.path, "hash": self.hash}}

