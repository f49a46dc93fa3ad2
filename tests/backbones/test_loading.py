"""Checkpoint loading: formats, the legacy GDN tensors, and one clear error per failure."""

import json
import time

import pytest
import torch
from safetensors.torch import load_file, save_file

from memexp.backbones import load_backbone
from memexp.backbones.loading import BackboneLoadError, load_tokenizer, resolve_pretrained
from memexp.backbones.tokenizer import ByteTokenizer, HFTokenizer
from memexp.core.schema import ConfigError

TINY = {"hidden_size": 32, "num_hidden_layers": 2, "num_heads": 2, "head_dim": 8, "vocab_size": 258,
        "initializer_range": 0.1}


@pytest.fixture
def saved(tmp_path):
    bb = load_backbone({"name": "tiny", "arch": "gdn", "tokenizer": "byte", "model": TINY, "seed": 1})
    bb.save_pretrained(tmp_path / "ckpt")
    return bb, tmp_path / "ckpt"


def _load(directory, **extra):
    return load_backbone({"name": "x", "arch": "gdn", "pretrained": str(directory), **extra})


def _logits(bb, n=12):
    return bb.forward(bb.init_state(), list(range(40, 40 + n)))


def _one_message(err: pytest.ExceptionInfo) -> str:
    msg = str(err.value)
    assert "\n" not in msg and err.value.__cause__ is None
    assert err.value.__context__ is None or err.value.__suppress_context__
    return msg


def test_legacy_attn_D_tensors_are_ignored(saved):
    bb, d = saved
    tensors = load_file(str(d / "model.safetensors"))
    for i in range(2):
        tensors[f"model.layers.{i}.attn.D"] = torch.ones(2)
    save_file(tensors, str(d / "model.safetensors"))
    assert torch.equal(_logits(_load(d)), _logits(bb))


def test_other_unexpected_tensors_are_an_error(saved):
    _, d = saved
    tensors = load_file(str(d / "model.safetensors"))
    tensors["model.layers.0.attn.E"] = torch.ones(2)
    save_file(tensors, str(d / "model.safetensors"))
    with pytest.raises(BackboneLoadError) as err:
        _load(d)
    assert "unexpected tensors: model.layers.0.attn.E" in _one_message(err)


def test_missing_tensor_is_an_error(saved):
    _, d = saved
    tensors = load_file(str(d / "model.safetensors"))
    del tensors["model.layers.1.attn.k_proj.weight"]
    save_file(tensors, str(d / "model.safetensors"))
    with pytest.raises(BackboneLoadError) as err:
        _load(d)
    msg = _one_message(err)
    assert "missing tensors: model.layers.1.attn.k_proj.weight" in msg and "backbone.pretrained=/path/to/dir" in msg


def test_shape_mismatch_is_one_clear_error(saved):
    _, d = saved
    config = json.loads((d / "config.json").read_text())
    config["head_dim"] = 16
    (d / "config.json").write_text(json.dumps(config))
    t0 = time.perf_counter()
    with pytest.raises(BackboneLoadError) as err:
        _load(d)
    msg = _one_message(err)
    assert "shape mismatch: " in msg and "model.layers.0.attn.k_proj.weight [16, 32] (model expects [32, 32])" in msg
    assert "missing" not in msg
    assert time.perf_counter() - t0 < 10


def test_pytorch_bin_and_sharded_safetensors_load_identically(saved, tmp_path):
    bb, d = saved
    tensors = load_file(str(d / "model.safetensors"))
    bin_dir, shard_dir = tmp_path / "bin", tmp_path / "shards"
    for target in (bin_dir, shard_dir):
        target.mkdir()
        for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
            (target / f).write_text((d / f).read_text())
    torch.save(tensors, bin_dir / "pytorch_model.bin")
    names = sorted(tensors)
    halves = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for fname, keys in halves.items():
        save_file({k: tensors[k] for k in keys}, str(shard_dir / fname))
    index = {"metadata": {}, "weight_map": {k: f for f, keys in halves.items() for k in keys}}
    (shard_dir / "model.safetensors.index.json").write_text(json.dumps(index))
    assert torch.equal(_logits(_load(bin_dir)), _logits(bb))
    assert torch.equal(_logits(_load(shard_dir)), _logits(bb))


def test_missing_local_directory_fails_fast_with_the_hint():
    t0 = time.perf_counter()
    with pytest.raises(BackboneLoadError) as err:
        resolve_pretrained("/no/such/checkpoint/dir")
    msg = _one_message(err)
    assert "no such directory" in msg and "backbone.pretrained=/path/to/dir" in msg
    with pytest.raises((BackboneLoadError, ConfigError)) as err:
        _load("/no/such/checkpoint/dir")
    assert "\n" not in str(err.value)
    assert time.perf_counter() - t0 < 5


def test_directory_without_weights_or_config(tmp_path):
    with pytest.raises(BackboneLoadError) as err:
        _load(tmp_path)
    assert "config.json is missing" in _one_message(err)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gated_deltanet", **TINY}))
    with pytest.raises(BackboneLoadError) as err:
        _load(tmp_path)
    assert "no weights found" in _one_message(err)


def test_unknown_hub_id_offline_fails_fast(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t0 = time.perf_counter()
    with pytest.raises(BackboneLoadError) as err:
        _load("memexp-tests-nobody/no-such-model")
    msg = _one_message(err)
    assert "memexp-tests-nobody/no-such-model" in msg and "local hub cache" in msg
    assert "backbone.pretrained=/path/to/dir" in msg
    assert time.perf_counter() - t0 < 10


def test_wrong_model_type_is_named(saved):
    _, d = saved
    config = json.loads((d / "config.json").read_text())
    config["model_type"] = "mamba2"
    (d / "config.json").write_text(json.dumps(config))
    with pytest.raises(BackboneLoadError) as err:
        _load(d)
    assert "model_type='mamba2'" in _one_message(err)


def test_unknown_model_field_is_a_config_error():
    with pytest.raises(ConfigError) as err:
        load_backbone({"name": "x", "arch": "gdn", "tokenizer": "byte", "model": {**TINY, "hiden_size": 3}})
    assert str(err.value).startswith("backbone.model.hiden_size: unknown field")


def test_byte_tokenizer_saves_as_a_standard_tokenizer_json(tmp_path):
    byte = ByteTokenizer()
    byte.save(tmp_path)
    loaded = load_tokenizer(None, tmp_path)
    assert isinstance(loaded, HFTokenizer)
    text = "plain ascii, ümlauts, 漢字 and emoji 🙂\n"
    assert loaded.encode(text, add_bos=True) == byte.encode(text, add_bos=True)
    assert loaded.decode(byte.encode(text) + [257]) == text == byte.decode(byte.encode(text))
    assert (loaded.bos_id, loaded.eos_id) == (256, 257)
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(tmp_path), local_files_only=True)
    assert hf.encode(text, add_special_tokens=False) == byte.encode(text)
    assert load_tokenizer("byte").encode("ab") == [97, 98]
