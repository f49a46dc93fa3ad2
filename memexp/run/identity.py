"""Run identity: the folder key is what determines a run's results, never where files live.

The key hashes the resolved configuration with every local path it names replaced by that
path's content fingerprint (a checkpoint directory, a tokenizer, a data file), plus the version
of the benchmark's generator / loader (`version=` in its BENCHES entry) and of the shared
metrics (`memexp.benchmarks.metrics.VERSION`). So:
- the same command in two clones (different absolute paths, same files) resumes the same folder;
- new weights at the same path, or an edited data file, give a new folder, never a silent resume;
- a hub id is named by the commit of its local snapshot when one is cached, else by id + revision.

A file's fingerprint is its size and the SHA-256 of every byte (memexp.core.file_digest): a change
to any one tensor of a checkpoint gives a new folder. The digest of a large file is cached
beside the Hugging Face cache, keyed by the file's path, size, timestamps and inode, so a 17 GB
checkpoint is read once, not on every run. (Before, files over 64 MiB were fingerprinted from
16 sampled blocks, which missed most single-tensor changes; their keys changed with this.)

`provenance(...)` records what does not enter the key but explains a result: memexp's version,
the git commit, library versions, the host.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from memexp.core.file_digest import path_fingerprint

IDENTITY_VERSION = 1  # bump when the key's recipe changes (every folder name changes with it)

# Fields that change how a run is watched, scheduled or where it writes, not what it computes.
NOT_IN_KEY = ("logger", "progress", "threads", "output_dir", "max_examples", "kernels", "wait_for_lock",
              "records_repair", "strict_data", "paths", "metric", "share_reads", "share_reads_max_memories")
# Locations of copies (a download cache, generated examples keyed by their own inputs): what they
# hold is named by the fields beside them (url, hub id) and by the benchmark's version.
LOCATION_FIELDS = ("cache_dir",)
# Fields whose string value names a hub model when it is not a local path.
HUB_FIELDS = ("pretrained", "tokenizer")
# A string is read as a path only in a path field or when written like one, so that a name
# (`backbone.name=tiny_gdn`) never turns into a fingerprint because the cwd holds such a folder.
# `method.adapter` (a read-adapter folder) enters by content: retrained adapters are a new run.
PATH_FIELDS = (*HUB_FIELDS, "init_from", "adapter")
# fields added after run folders existed, each with its value that changes nothing
BENCH_FIELDS_ADDED = (("shard", None), ("essay_standin", False), ("prompt", "zeroscrolls"))
# `router_query_instruction` at "" (no instruction) is what every run computed before it existed: a
# non-encoder router's config always holds "" (NoteBankConfig), so those runs keep their keys, and a bge
# run with "" too; a bge run at the default (BGE's instruction) embeds a different question, so it is
# a new folder, never a resume of one made without the instruction.
METHOD_FIELDS_ADDED = (("adapter", None), ("layers", None), ("router_model", "BAAI/bge-base-en-v1.5"),
                      ("write_tail", False), ("memory_dtype", "float32"), ("router_query_instruction", ""))


def _looks_like_hub_id(value: str) -> bool:
    return bool(value) and not value.startswith(("/", ".", "~")) and value.count("/") <= 1 and "\\" not in value


def hub_fingerprint(repo_id: str, revision: str | None, fetch: bool = False) -> dict[str, Any]:
    """The commit of the cached snapshot of `repo_id` when there is one (it names the files
    exactly), else the id and the revision as asked. Only with `fetch` (the runner, which would
    download the checkpoint moments later anyway) is a missing snapshot downloaded first, so that
    a first run cut short resumes in the folder its second start computes."""
    if fetch:
        try:
            from memexp.backbones.loading import resolve_pretrained

            resolve_pretrained(repo_id, revision)
        except Exception:  # offline without files, or a bad id: loading says so in one line
            pass
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    except Exception:  # no hub library, or an id the hub would reject: named as written
        found = None
    if isinstance(found, str):
        return {"hub": repo_id, "commit": Path(found).parent.name}
    return {"hub": repo_id, "revision": revision}


def _identify(value: Any, key: str, parent: dict, fetch: bool) -> Any:
    """A config leaf as it enters the key: local paths by content, hub ids by snapshot."""
    if not isinstance(value, str) or not value:
        return value
    path = Path(value).expanduser()
    pathlike = key in PATH_FIELDS or key.endswith("_path") or value.startswith(("/", "./", "../", "~"))
    if pathlike and path.exists():
        return path_fingerprint(path)
    if key in HUB_FIELDS and _looks_like_hub_id(value) and value != "byte":
        return hub_fingerprint(value, parent.get("revision"), fetch and key == "pretrained")
    return value


def _walk(node: Any, fetch: bool, key: str = "", parent: dict | None = None) -> Any:
    if isinstance(node, dict):
        return {k: _walk(v, fetch, k, node) for k, v in node.items() if k not in LOCATION_FIELDS}
    if isinstance(node, list):
        return [_walk(v, fetch, key, parent or {}) for v in node]
    return _identify(node, key, parent or {}, fetch)


def identity(cfg_dict: dict, fetch: bool = False) -> dict[str, Any]:
    """Everything the folder key hashes (also written to provenance.json, to explain a new folder)."""
    from memexp.benchmarks.metrics import VERSION as METRICS_VERSION
    from memexp.core.registry import BENCHES

    semantic = {k: v for k, v in cfg_dict.items() if k not in NOT_IN_KEY}
    # fields added later, at the value that computes what runs computed before them, are keyed as
    # before they existed (an unsharded run; RULER without its essay stand-in; no read adapters)
    for group, added in (("bench", BENCH_FIELDS_ADDED), ("method", METHOD_FIELDS_ADDED)):
        if isinstance(semantic.get(group), dict):
            semantic[group] = {k: v for k, v in semantic[group].items() if (k, v) not in added}
    bench = cfg_dict.get("bench", {}).get("name")
    entry = BENCHES.get(bench) if bench in BENCHES else None
    return {
        "identity_version": IDENTITY_VERSION,
        "config": _walk(semantic, fetch),
        "bench_version": entry.meta.get("version") if entry is not None else None,
        "metrics_version": METRICS_VERSION,
    }


def identity_hash(ident: dict) -> str:
    blob = json.dumps(ident, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def run_key(cfg, fetch: bool = False) -> tuple[str, dict]:
    """(folder key, what it hashes) of a RunConfig (`fetch`: see `hub_fingerprint`)."""
    ident = identity(asdict(cfg), fetch)
    return identity_hash(ident), ident


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parents[1]  # memexp/, inside the checkout (git finds the repository)
    try:
        out = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                             capture_output=True, text=True, timeout=10)
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("-dirty" if out.stdout.strip() else "")


def library_versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("memexp", "torch", "transformers", "tokenizers", "flash-linear-attention", "mamba-ssm",
                 "triton", "omegaconf", "hydra-core"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def session() -> dict[str, Any]:
    """Who ran (or resumed) the folder, with what code, on how many torch CPU threads."""
    torch = sys.modules.get("torch")
    return {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": socket.gethostname(), "pid": os.getpid(),
            "argv": sys.argv, "git_commit": _git_commit(), "versions": library_versions(),
            "torch_threads": torch.get_num_threads() if torch is not None else None}


def write_provenance(folder: Path, ident: dict) -> None:
    """provenance.json: the identity the key hashes, and one entry per session (first run, resumes)."""
    from memexp.core.atomic import atomic_write

    path = folder / "provenance.json"
    try:
        old = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, json.JSONDecodeError):
        old = {}  # a provenance file is informative only: an unreadable one is rewritten
    sessions = [*old.get("sessions", []), session()]
    atomic_write(path, json.dumps({"identity": ident, "sessions": sessions}, indent=2, default=str) + "\n")
