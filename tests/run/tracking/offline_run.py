"""Read an offline W&B run back from disk, the way `wandb sync` reads it.

An offline run leaves `wandb/offline-run-<time>-<id>/` with `run-<id>.wandb` and `files/`. The
.wandb file is what `wandb sync` uploads, so it holds everything the server would get: it starts
with the 7-byte header `:W&B` + magic 0xBEE1 + version, followed by LevelDB log records (32 KiB
blocks; each record a 7-byte header crc32c/length/type, type FULL=1 or FIRST/MIDDLE/LAST=2/3/4
for a record split over blocks), each payload one `wandb.proto.wandb_internal_pb2.Record`
protobuf. This reader depends only on that format and the protobuf classes wandb ships (wandb
0.31 no longer ships a Python datastore reader). Tables are read from the JSON file the run
writes under files/ (the history row points at it); artifacts from their manifests in the
.wandb file, whose entries name the staged copy of every file (`local_path`) and its MD5.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wandb.proto import wandb_internal_pb2 as pb

BLOCK = 32768
HEADER = 7


def read_records(path: Path) -> list[pb.Record]:
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    pos, pending, out = HEADER, b"", []
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # a block's tail too short for a header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        if kind == 0:  # zero padding up to the end of the block
            pos += left
            continue
        pending += data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if kind in (1, 4):
            rec = pb.Record()
            rec.ParseFromString(pending)
            out.append(rec)
            pending = b""
    return out


def _key(item) -> str:
    return "/".join(item.nested_key) if item.nested_key else item.key


@dataclass
class OfflineRun:
    path: Path
    run_id: str = ""
    name: str = ""
    group: str = ""
    tags: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    step_metrics: dict[str, str] = field(default_factory=dict)  # metric -> its x-axis (define_metric)
    artifacts: list[pb.ArtifactRecord] = field(default_factory=list)

    @classmethod
    def load(cls, run_dir: Path) -> OfflineRun:
        (wandb_file,) = run_dir.glob("run-*.wandb")
        run = cls(run_dir)
        for rec in read_records(wandb_file):
            kind = rec.WhichOneof("record_type")
            if kind == "run":  # sent again whenever tags or config change: the last one holds
                r = rec.run
                run.run_id, run.name, run.group, run.tags = r.run_id, r.display_name, r.run_group, list(r.tags)
                run.config = {u.key: json.loads(u.value_json) for u in r.config.update}
            elif kind == "history":
                run.history.append({_key(i): json.loads(i.value_json) for i in rec.history.item})
            elif kind == "summary":
                # nested keys ("tab", "path") are a logged media object's fields: keep the top-level ones
                run.summary.update({i.key or i.nested_key[0]: json.loads(i.value_json)
                                    for i in rec.summary.update if i.key or len(i.nested_key) == 1})
            elif kind == "metric" and rec.metric.step_metric:
                run.step_metrics[rec.metric.name] = rec.metric.step_metric
            elif kind == "artifact":
                run.artifacts.append(rec.artifact)
        return run

    def table(self, key: str) -> dict[str, Any]:
        """The last table logged under `key`, as {"columns": [...], "data": [[...], ...]}."""
        rows = [h for h in self.history if f"{key}/path" in h]
        assert rows, f"no table {key} in {self.path}"
        return json.loads((self.path / "files" / rows[-1][f"{key}/path"]).read_text())

    def artifact(self, type_: str) -> pb.ArtifactRecord:
        (art,) = [a for a in self.artifacts if a.type == type_]
        return art


def manifest_files(artifact: pb.ArtifactRecord) -> dict[str, tuple[str, str]]:
    """{path in the artifact: (base64 MD5, staged local copy)}."""
    return {c.path: (c.digest, c.local_path) for c in artifact.manifest.contents}


def md5_b64(path: Path) -> str:
    return base64.b64encode(hashlib.md5(path.read_bytes()).digest()).decode()


def offline_runs(root: Path) -> list[OfflineRun]:
    """Every offline run under `root`, oldest first (the folder names start with the start time)."""
    return [OfflineRun.load(d) for d in sorted(root.rglob("offline-run-*")) if d.is_dir()]
