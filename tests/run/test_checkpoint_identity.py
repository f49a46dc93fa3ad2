"""A checkpoint is identified by every byte: any one changed tensor gives a new run folder, and the
digest of a large file is cached without ever hiding a change."""

import json
import os
import random
import shutil
import struct
import time

import pytest

from memexp.core import file_digest
from memexp.core.compose import load_config
from memexp.core.schema import ASSETS_DIR
from memexp.run.identity import run_key

TENSORS = 100
TENSOR_BYTES = 800 * 2**10  # 100 tensors of 800 KiB: an 80 MiB checkpoint, above any sampling threshold
HOUR_AGO_NS = (time.time_ns() - 3600 * 10**9)


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """The fingerprint cache lies beside $HF_HOME: each test gets its own."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf" / "huggingface"))
    return tmp_path / "hf" / "memexp" / "fingerprints"


def write_safetensors(path, rng):
    """A safetensors file written by hand (8-byte header length, JSON header, data), so that the
    tensors' byte ranges used below come from this test, not from the code under test."""
    header, offset = {}, 0
    for i in range(TENSORS):
        header[f"layers.{i}.weight"] = {"dtype": "F32", "shape": [TENSOR_BYTES // 4], "data_offsets": [offset,
                                                                                                     offset + TENSOR_BYTES]}
        offset += TENSOR_BYTES
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head)
        for _ in range(TENSORS):
            f.write(rng.randbytes(TENSOR_BYTES))
    return 8 + len(head)


def checkpoint(tmp_path, rng):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(ASSETS_DIR / "tiny_gdn", ckpt)
    data_start = write_safetensors(ckpt / "model.safetensors", rng)
    return ckpt, data_start


def config(ckpt):
    return load_config(["backbone=tiny_gdn", f"backbone.pretrained={ckpt}", "method=plain", "bench=ruler"])


def test_changing_any_one_tensor_of_an_80_mib_checkpoint_changes_the_run_key(tmp_path):
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    ckpt, data_start = checkpoint(tmp_path, rng)
    cfg = config(ckpt)
    keys = [run_key(cfg)[0]]
    # each change comes on top of the ones before: a key equal to the previous one would mean the
    # changed tensor's bytes are not part of the fingerprint
    for i in rng.sample(range(TENSORS), 50):
        at = data_start + i * TENSOR_BYTES + rng.randrange(TENSOR_BYTES)
        with open(ckpt / "model.safetensors", "r+b") as f:
            f.seek(at)
            old = f.read(1)
            f.seek(at)
            f.write(bytes([old[0] ^ 0x01]))
        keys.append(run_key(cfg)[0])
        assert keys[-1] != keys[-2], f"tensor {i} (byte {at}) changed and the key did not (seed {seed})"
    assert len(set(keys)) == len(keys)


def test_a_settled_file_is_hashed_once_and_a_touch_rehashes_to_the_same_key(tmp_path, own_cache, monkeypatch):
    ckpt, _ = checkpoint(tmp_path, random.Random(0))
    weights = ckpt / "model.safetensors"
    os.utime(weights, ns=(HOUR_AGO_NS, HOUR_AGO_NS))
    reads = []
    stream = file_digest._stream_sha256
    monkeypatch.setattr(file_digest, "_stream_sha256",
                        lambda p: (reads.append(p) if p.name == weights.name else None) or stream(p))
    cfg = config(ckpt)
    first = run_key(cfg)[0]
    assert len(reads) == 1 and len(list(own_cache.glob("*.json"))) == 1
    assert run_key(cfg)[0] == first and len(reads) == 1  # cached: not read again
    os.utime(weights, ns=(HOUR_AGO_NS + 10**9, HOUR_AGO_NS + 10**9))  # touched, same bytes
    assert run_key(cfg)[0] == first and len(reads) == 2


def test_new_bytes_behind_a_restored_mtime_are_seen(tmp_path, monkeypatch):
    """`cp -p` or `touch -r` can put the old mtime back over new bytes of the same size and inode."""
    ckpt, data_start = checkpoint(tmp_path, random.Random(1))
    weights = ckpt / "model.safetensors"
    os.utime(weights, ns=(HOUR_AGO_NS, HOUR_AGO_NS))
    cfg = config(ckpt)
    first = run_key(cfg)[0]
    inode = weights.stat().st_ino
    with open(weights, "r+b") as f:
        f.seek(data_start + 5)
        f.write(b"\x00\x01\x02")
    os.utime(weights, ns=(HOUR_AGO_NS, HOUR_AGO_NS))
    assert weights.stat().st_ino == inode and weights.stat().st_mtime_ns == HOUR_AGO_NS
    assert run_key(cfg)[0] != first


def test_a_file_written_moments_ago_is_not_cached(tmp_path, own_cache):
    """Timestamps tick every few milliseconds: a file still being written could change again
    without moving them, so its digest is not kept until it has settled."""
    ckpt, _ = checkpoint(tmp_path, random.Random(2))
    run_key(config(ckpt))
    assert not list(own_cache.glob("*.json"))


def test_an_unwritable_cache_costs_only_time(tmp_path, monkeypatch):
    ckpt, _ = checkpoint(tmp_path, random.Random(3))
    os.utime(ckpt / "model.safetensors", ns=(HOUR_AGO_NS, HOUR_AGO_NS))
    monkeypatch.setenv("HF_HOME", "/proc/memexp-no-cache/huggingface")
    cfg = config(ckpt)
    assert run_key(cfg)[0] == run_key(cfg)[0]
