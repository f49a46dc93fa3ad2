"""Adapters on disk: a folder with `adapter_config.json` (the spec) and `adapter_model.safetensors`
(the tensors, by `<module name>.lora_A` / `.lora_B`), PEFT's file names. Small: only the
adapters, never the base weights.

`content_hash` identifies an adapter set by what it computes (spec + tensor values), not by
file bytes, so a record can store (path, hash) and a later run can check it loaded the same
adapters; the in-memory set and the folder it was saved to hash the same.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from memexp.adapters.base import AdapterError, Adapters, model_of
from memexp.adapters.lora import LoRA

SPEC_FILE = "adapter_config.json"
TENSOR_FILE = "adapter_model.safetensors"
KINDS = {LoRA.kind: LoRA}  # spec["kind"] -> the class whose from_spec rebuilds it


def save_adapters(adapters: Adapters, directory: str | Path) -> str:
    """Write the spec and tensors into `directory` (created); returns the content hash."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    spec, tensors = adapters.spec(), adapters.tensors()
    (directory / SPEC_FILE).write_text(json.dumps(spec, indent=2, sort_keys=True) + "\n")
    save_file({k: t.detach().contiguous().cpu() for k, t in tensors.items()}, str(directory / TENSOR_FILE))
    return _digest(spec, tensors)


def load_adapters(target, directory: str | Path) -> Adapters:
    """The adapters saved in `directory`, attached to `target` (a backbone or an nn.Module) on
    its device (fp32 masters, cast to the compute dtype at use), off until `enabled()`.
    Adapters saved for other shapes or module names raise one AdapterError naming the folder
    and the first difference."""
    directory = Path(directory)
    model = model_of(target)
    spec = read_spec(directory)
    cls = KINDS.get(spec.get("kind"))
    if cls is None:
        raise AdapterError(f"{directory / SPEC_FILE}: kind={spec.get('kind')!r}; known kinds are {', '.join(KINDS)}")
    try:
        adapters = cls.from_spec(model, spec)
        adapters.load_tensors(load_file(str(directory / TENSOR_FILE)))
    except AdapterError as e:
        raise AdapterError(f"{directory}: these adapters do not fit {type(model).__name__}: {e}") from None
    return adapters


def read_spec(directory: str | Path) -> dict:
    path = Path(directory) / SPEC_FILE
    if not path.is_file() or not (Path(directory) / TENSOR_FILE).is_file():
        raise AdapterError(f"{directory}: not an adapter folder (needs {SPEC_FILE} and {TENSOR_FILE})")
    return json.loads(path.read_text())


def content_hash(adapters: Adapters) -> str:
    """sha256 of the spec and every tensor's name, dtype, shape and bytes (hex)."""
    return _digest(adapters.spec(), adapters.tensors())


def file_hash(directory: str | Path) -> str:
    """`content_hash` of the adapters saved in `directory`, without a model."""
    return _digest(read_spec(directory), load_file(str(Path(directory) / TENSOR_FILE)))


def _digest(spec: dict, tensors: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256(json.dumps(spec, sort_keys=True).encode())
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        h.update(f"\0{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()
