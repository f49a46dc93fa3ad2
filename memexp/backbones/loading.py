"""Checkpoint loading shared by every backbone: resolve, read config and tensors, load by name.

Every failure ends in one `BackboneLoadError` that says what was tried and how to point
memexp at a local directory instead (`backbone.pretrained=/path/to/dir`).
"""

from __future__ import annotations

import json
import os
import re
import socket
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, Iterator
from urllib.parse import urlparse

import torch
from torch import nn

from memexp.backbones.base import Tokenizer
from memexp.backbones.meta_device import on_meta_device

LOCAL_HINT = "give a local checkpoint directory with backbone.pretrained=/path/to/dir"
TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
                   "vocab.json", "merges.txt", "*.tiktoken"]
WEIGHT_PATTERNS = ["*.safetensors", "*.safetensors.index.json"]
BIN_PATTERNS = ["*.bin", "*.bin.index.json"]


class BackboneLoadError(RuntimeError):
    """A checkpoint or tokenizer could not be loaded; the message is complete on its own."""


def resolve_device(name: str) -> torch.device:
    """'auto' -> cuda when available, else cpu."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise BackboneLoadError("backbone.device=cuda but no CUDA device is visible; use backbone.device=auto or cpu")
    return torch.device(name)


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """'auto' -> bfloat16 on CUDA, float32 elsewhere."""
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return getattr(torch, name)


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


@lru_cache(maxsize=None)
def hub_reachable(timeout: float = 3.0) -> bool:
    """A TCP connect to the hub endpoint, so an offline machine fails in seconds instead of
    waiting on the hub client's retries."""
    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    try:
        with socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout):
            return True
    except OSError:
        return False


def _looks_like_path(source: str) -> bool:
    """Hub ids are 'name' or 'owner/name'; anything else names a directory."""
    return source.startswith(("/", ".", "~")) or source.count("/") > 1 or "\\" in source


def resolve_pretrained(source: str, revision: str | None = None, patterns: Iterable[str] | None = None,
                       field: str = "backbone.pretrained") -> Path:
    """A local directory holding the checkpoint `source` (a directory or a hub id).

    Hub ids come from the local hub cache when HF_HUB_OFFLINE is set or the hub is
    unreachable, and are downloaded otherwise (only files matching `patterns`; safetensors
    are preferred and pytorch .bin files are fetched only when a repo has no safetensors).
    `field` is the setting that named `source` (another model than the backbone, e.g. a router's
    encoder), so every message names what the user sets.
    """
    hint = LOCAL_HINT.replace("backbone.pretrained", field)
    path = Path(source).expanduser()
    if path.is_dir():
        return path
    if _looks_like_path(source):
        raise BackboneLoadError(f"{field}={source!r}: no such directory (and not a hub id 'owner/name'); {hint}")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    online = not _offline() and hub_reachable()
    where = "downloading from the hub" if online else (
        "the local hub cache (HF_HUB_OFFLINE is set)" if _offline() else "the local hub cache (the hub is unreachable)")
    base = list(patterns) if patterns is not None else ["*.json", *TOKENIZER_FILES, *WEIGHT_PATTERNS]
    try:
        directory = Path(snapshot_download(source, revision=revision, allow_patterns=base, local_files_only=not online))
        if patterns is None and not list(directory.glob("*.safetensors")):
            directory = Path(snapshot_download(source, revision=revision, allow_patterns=BIN_PATTERNS,
                                               local_files_only=not online))
    except GatedRepoError:
        raise BackboneLoadError(f"{field}={source!r}: the hub repo is gated; accept its terms and log in, "
                                f"or {hint}") from None
    except RepositoryNotFoundError:
        raise BackboneLoadError(f"{field}={source!r}: no such model on the hub (or it is private); "
                                f"tried {where}; {hint}") from None
    except RevisionNotFoundError:
        raise BackboneLoadError(f"{field}={source!r}: revision {revision!r} not found; tried {where}; "
                                f"{hint}") from None
    except HFValidationError:
        raise BackboneLoadError(f"{field}={source!r}: neither a directory nor a valid hub id; {hint}") from None
    except LocalEntryNotFoundError:
        raise BackboneLoadError(f"{field}={source!r}: not in the local hub cache and no network download "
                                f"possible; tried {where}; {hint}") from None
    except Exception as e:  # the hub client's network stack raises many types; all mean "download failed"
        raise BackboneLoadError(f"{field}={source!r}: download failed ({type(e).__name__}: "
                                f"{str(e).splitlines()[0] if str(e) else ''}); tried {where}; {hint}") from None
    return directory


def read_config(directory: Path) -> dict:
    """config.json of a checkpoint directory as a dict."""
    path = Path(directory) / "config.json"
    if not path.is_file():
        raise BackboneLoadError(f"{directory}: config.json is missing; {LOCAL_HINT} holding config.json and the weights")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise BackboneLoadError(f"{path}: not valid JSON ({e})") from None


class WeightFiles:
    """The tensors of a checkpoint directory, read one at a time by name.

    Looks for model.safetensors.index.json, then *.safetensors, then
    pytorch_model.bin.index.json, then *.bin. Safetensors are opened lazily; .bin files are
    memory-mapped.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._open: dict[Path, dict] = {}
        self.files = self._find()
        self._where: dict[str, Path] = {}
        for f in self.files:
            for name in self._keys(f):
                self._where[name] = f

    def _find(self) -> list[Path]:
        d = self.directory
        for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
            if (d / index).is_file():
                shards = sorted(set(json.loads((d / index).read_text())["weight_map"].values()))
                missing = [s for s in shards if not (d / s).is_file()]
                if missing:
                    raise BackboneLoadError(f"{d}: {index} lists shards that are missing: {', '.join(missing[:5])}; "
                                            f"{LOCAL_HINT} holding the complete checkpoint")
                return [d / s for s in shards]
        for pattern in ("*.safetensors", "*.bin"):
            found = sorted(d.glob(pattern))
            if found:
                return found
        raise BackboneLoadError(f"{d}: no weights found (looked for model.safetensors[.index.json], *.safetensors, "
                                f"pytorch_model.bin[.index.json], *.bin); {LOCAL_HINT}")

    def _keys(self, f: Path) -> list[str]:
        try:
            if f.suffix == ".safetensors":
                from safetensors import safe_open

                with safe_open(str(f), framework="pt") as h:
                    return list(h.keys())
            return list(self._load_bin(f).keys())
        except Exception as e:  # safetensors and torch.load report corrupt files with many types
            raise BackboneLoadError(f"{f}: cannot read the weights ({type(e).__name__}: "
                                    f"{str(e).splitlines()[0] if str(e) else ''}); {LOCAL_HINT}") from None

    def _load_bin(self, f: Path) -> dict:
        if f not in self._open:
            try:
                self._open[f] = torch.load(str(f), map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError:  # files saved before torch's zip format cannot be memory-mapped
                self._open[f] = torch.load(str(f), map_location="cpu", weights_only=True)
        return self._open[f]

    def keys(self) -> list[str]:
        return list(self._where)

    def get(self, name: str) -> torch.Tensor:
        f = self._where[name]
        if f.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(f), framework="pt") as h:
                return h.get_tensor(name)
        return self._load_bin(f)[name]

    def items(self) -> Iterator[tuple[str, torch.Tensor]]:
        for name in self._where:
            yield name, self.get(name)


def load_weights(
    module: nn.Module,
    weights: WeightFiles | dict[str, torch.Tensor],
    ignore: Iterable[str] = (),
    rename: Callable[[str], str] | None = None,
    source: str = "checkpoint",
) -> None:
    """Copy tensors into `module`'s parameters and persistent buffers by name, casting to
    their dtype and device.

    `ignore` holds regexes of checkpoint tensors to skip (legacy tensors the model does not
    use); `rename` maps checkpoint names to module names. Tied parameters count as loaded
    when any of their names is. Missing, unexpected or mis-shaped tensors end in one
    `BackboneLoadError` listing them.
    """
    targets = module.state_dict(keep_vars=True)  # parameters and persistent buffers, tied names included
    skip = [re.compile(p) for p in ignore]
    loaded: set[int] = set()
    misfit: set[int] = set()
    unexpected, mismatched = [], []
    names = weights.keys()
    for name in names:
        key = rename(name) if rename else name
        if key not in targets:
            if not any(p.search(name) for p in skip):
                unexpected.append(name)
            continue
        tensor = weights.get(name) if isinstance(weights, WeightFiles) else weights[name]
        target = targets[key]
        if tuple(tensor.shape) != tuple(target.shape):
            mismatched.append(f"{name} {list(tensor.shape)} (model expects {list(target.shape)})")
            misfit.add(id(target))
            continue
        with torch.no_grad():
            target.copy_(tensor)
        loaded.add(id(target))
    missing = [n for n, t in targets.items() if id(t) not in loaded and id(t) not in misfit]
    problems = []
    if mismatched:
        problems.append(f"shape mismatch: {'; '.join(mismatched[:5])}" + (f" (+{len(mismatched) - 5} more)" if len(mismatched) > 5 else ""))
    if missing:
        problems.append(f"missing tensors: {', '.join(missing[:5])}" + (f" (+{len(missing) - 5} more)" if len(missing) > 5 else ""))
    if unexpected:
        problems.append(f"unexpected tensors: {', '.join(unexpected[:5])}" + (f" (+{len(unexpected) - 5} more)" if len(unexpected) > 5 else ""))
    if problems:
        raise BackboneLoadError(f"{source} does not fit the model built from its config.json: {'; '.join(problems)}; "
                                f"check the checkpoint and backbone.arch, or {LOCAL_HINT}")


DECAY_GATES = ("A_log", "dt_bias")  # recurrent decay parameters every upstream layer keeps in fp32


def place_model(model: nn.Module, device: torch.device, dtype: torch.dtype, empty: bool,
                keep_fp32: Iterable[str] = ()) -> None:
    """Cast `model` to the compute dtype and move it to `device`, in place.

    Parameters whose own name (the part after the last dot) is in `keep_fp32` stay fp32: the
    recurrent gates (A_log, dt_bias, Mamba-2's D) are tiny and the decay is accumulated in fp32,
    as the upstream layers keep them. `empty` allocates uninitialised storage for a model built
    on the meta device (the checkpoint fills it next); otherwise the weights are moved.
    Parameters the model shared before the move (tied embeddings) are shared again after it,
    because the move re-creates each module's parameters separately.
    """
    first_name: dict[int, str] = {}
    aliases = []
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in first_name:
            aliases.append((name, first_name[id(p)]))
        else:
            first_name[id(p)] = name
    keep = set(keep_fp32)
    # the kept tensors as they are before the cast: casting them down and back up would leave
    # random-init gates rounded to the compute dtype's bits
    kept = {name: p.data for name, p in model.named_parameters() if name.rpartition(".")[2] in keep}
    model.to(dtype=dtype)
    for name, p in model.named_parameters():
        if name in kept:
            p.data = kept[name].float()
    if empty:
        # Module.to_empty, with torch.empty in place of empty_like: empty_like on a meta tensor
        # imports sympy (0.3 CPU-s in every process that loads a checkpoint)
        model._apply(lambda t: torch.empty(t.shape, dtype=t.dtype, device=device))
    else:
        model.to(device=device)
    for alias, source in aliases:
        owner, _, leaf = alias.rpartition(".")
        setattr(model.get_submodule(owner), leaf, model.get_parameter(source))


def new_model(model_class: Callable[..., nn.Module], conf, device: torch.device, dtype: torch.dtype,
              seed: int | None = None, keep_fp32: Iterable[str] = ()) -> nn.Module:
    """`model_class(conf)` placed by `place_model`. With `seed`, initialised by the model's
    `init_weights(seed)`; without, built on the meta device and left uninitialised, because a
    checkpoint overwrites every tensor next and random init of a large model costs minutes."""
    if seed is None:
        with on_meta_device():
            model = model_class(conf)
        place_model(model, device, dtype, empty=True, keep_fp32=keep_fp32)
    else:
        model = model_class(conf)
        model.init_weights(seed)
        place_model(model, device, dtype, empty=False, keep_fp32=keep_fp32)
    return model


def check_vocab(tokenizer: Tokenizer, vocab_size: int) -> None:
    """A tokenizer with more ids than the embedding has rows would index past it."""
    vocab = getattr(tokenizer, "vocab_size", None)
    if vocab is not None and vocab > vocab_size:
        raise BackboneLoadError(f"tokenizer has {vocab} ids but the model's vocab_size is {vocab_size}; "
                                f"set backbone.tokenizer to the model's tokenizer")


def save_weights(module: nn.Module, directory: Path, filename: str = "model.safetensors") -> None:
    """Write the module's parameters and persistent buffers as one safetensors file; a tied
    tensor is written once, under its first name."""
    from safetensors.torch import save_file

    seen: set[tuple] = set()
    tensors = {}
    for name, t in module.state_dict().items():
        key = t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape)
        if key in seen:
            continue
        seen.add(key)
        tensors[name] = t.detach().contiguous().cpu()
    Path(directory).mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(Path(directory) / filename), metadata={"format": "pt"})


def _special_token(config: dict, key: str) -> str | None:
    value = config.get(key)
    if isinstance(value, dict):
        value = value.get("content")
    return value


def load_tokenizer(source: str | None, weights_dir: Path | None = None, revision: str | None = None) -> Tokenizer:
    """The tokenizer named by `source`: 'byte' (memexp's byte tokenizer), a directory or hub
    id (at `revision`), or None for the one beside the weights in `weights_dir`.

    A tokenizer.json is read with `tokenizers`; otherwise transformers' AutoTokenizer reads
    the directory (local files only). BOS/EOS come from tokenizer_config.json, then
    config.json's bos/eos_token_id.
    """
    from memexp.backbones.tokenizer import ByteTokenizer, HFTokenizer

    if source == "byte":
        return ByteTokenizer()
    if source is None and weights_dir is None:
        raise BackboneLoadError("no tokenizer: set backbone.tokenizer to 'byte', a directory or a hub id")
    directory = Path(weights_dir) if source is None else resolve_pretrained(source, revision, patterns=["*.json", *TOKENIZER_FILES])
    tok_config = json.loads((directory / "tokenizer_config.json").read_text()) if (directory / "tokenizer_config.json").is_file() else {}
    model_config = json.loads((directory / "config.json").read_text()) if (directory / "config.json").is_file() else {}
    if (directory / "tokenizer.json").is_file():
        from tokenizers import Tokenizer as RustTokenizer

        tok = RustTokenizer.from_file(str(directory / "tokenizer.json"))

        def special(key: str, fallback: str) -> int | None:
            token = _special_token(tok_config, key + "_token")
            tid = tok.token_to_id(token) if token else None
            if tid is None:
                tid = model_config.get(key + "_token_id")
            if tid is None:
                tid = tok.token_to_id(fallback)
            return tid

        return HFTokenizer(tok, special("bos", "<s>"), special("eos", "</s>"))
    if tok_config or any((directory / f).is_file() for f in ("tokenizer.model", "vocab.json")):
        try:
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
        except Exception as e:  # transformers raises many kinds here; all mean "cannot read it"
            raise BackboneLoadError(f"{directory}: transformers could not load the tokenizer ({type(e).__name__}: "
                                    f"{str(e).splitlines()[0] if str(e) else ''}); set backbone.tokenizer to a directory "
                                    f"with tokenizer.json") from None
        return HFTokenizer(tok, tok.bos_token_id, tok.eos_token_id)
    raise BackboneLoadError(f"{directory}: no tokenizer files (tokenizer.json, tokenizer.model, tokenizer_config.json); "
                            f"set backbone.tokenizer to 'byte', a directory or a hub id")


def read_chat_template(directory: Path, source: str | None = None, revision: str | None = None) -> str | None:
    """The chat template of a checkpoint: tokenizer_config.json's `chat_template`, else
    chat_template.jinja beside it (fetched from the hub for hub ids when absent)."""
    directory = Path(directory)
    tok_config = directory / "tokenizer_config.json"
    if tok_config.is_file():
        template = json.loads(tok_config.read_text()).get("chat_template")
        if isinstance(template, str):
            return template
    jinja = directory / "chat_template.jinja"
    if not jinja.is_file() and source is not None and not Path(source).expanduser().is_dir():
        try:
            jinja = resolve_pretrained(source, revision, patterns=["chat_template.jinja"]) / "chat_template.jinja"
        except BackboneLoadError:
            return None
    return jinja.read_text() if jinja.is_file() else None
