"""Qwen3.5 hybrid: parity with transformers' Qwen3_5ForCausalLM on its torch path (run in a
subprocess with FLA hidden, since transformers picks FLA's GPU kernels whenever FLA
imports), the vision-language checkpoint layout, YaRN override, chat template. The contract
every architecture meets (continuation with attention positions, clones, rescale, GDN-only
channels and observer, generate, methods) is checked in test_contract.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from backbone_checks import pieces_of
from safetensors import safe_open
from safetensors.torch import save_file

from memexp.backbones.hybrid.model import build
from memexp.backbones.loading import BackboneLoadError
from memexp.backbones.tokenizer import ByteTokenizer
from memexp.core.schema import BackboneConfig, ConfigError

YARN = {"rope_type": "yarn", "rope_theta": 10000.0, "partial_rotary_factor": 0.25, "factor": 4.0,
        "original_max_position_embeddings": 16, "mrope_section": [1, 1, 0], "mrope_interleaved": True}
TINY = dict(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, linear_key_head_dim=8, linear_value_head_dim=8,
            linear_num_key_heads=2, linear_num_value_heads=4, max_position_embeddings=64, rope_parameters=YARN)

REFERENCE = r"""
import json, sys
sys.modules["fla"] = None  # transformers would pick FLA's GPU-only kernels over its torch path
import torch
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

out = sys.argv[1]
torch.manual_seed(0)
model = Qwen3_5ForCausalLM(Qwen3_5TextConfig(**json.loads(sys.argv[2]))).eval()
with torch.no_grad():
    for p in model.parameters():
        p.add_(0.1 * torch.randn_like(p))
model.save_pretrained(out)
ids = torch.randint(0, 300, (1, 75))
with torch.no_grad():
    logits = model(ids).logits[0]
torch.save({"ids": ids[0], "logits": logits}, out + "/reference.pt")
"""


def tiny(prefill_chunk: int = 2048, window: int | None = None, **model):
    return build(BackboneConfig(name="tiny_qwen35", arch="qwen35", device="cpu", tokenizer="byte", window=window,
                                prefill_chunk=prefill_chunk, model={**TINY, **model}))


@pytest.fixture(scope="module")
def hf_qwen35(tmp_path_factory):
    directory = tmp_path_factory.mktemp("hf_qwen35")
    subprocess.run([sys.executable, "-c", REFERENCE, str(directory), json.dumps(TINY)], check=True,
                   capture_output=True, timeout=300)
    ByteTokenizer().save(directory)
    reference = torch.load(directory / "reference.pt")
    return directory, reference["ids"], reference["logits"]


@pytest.mark.parametrize("cuts", [[75], [1, 2, 72], [30, 45], [3, 1, 66, 5]])
def test_logits_match_transformers(hf_qwen35, cuts):
    """GDN and gated-attention layers, YaRN partial RoPE, GVA value heads, chunked prefill and
    continuation (attention positions follow the context)."""
    directory, ids, ref = hf_qwen35
    backbone = build(BackboneConfig(name="q", arch="qwen35", pretrained=str(directory), device="cpu", prefill_chunk=20))
    state, end = backbone.init_state(), 0
    for piece in pieces_of(ids, cuts):
        logits = backbone.forward(state, piece)
        end += piece.numel()
        torch.testing.assert_close(logits, ref[end - 1], atol=2e-4, rtol=2e-4)
    assert state.kv[3].length == 75 and state.recurrent[3] is None and state.kv[0] is None


def test_reads_vision_language_layout(hf_qwen35, tmp_path):
    """The released checkpoint nests the text model under model.language_model and ships a
    vision tower and an MTP head, which are ignored."""
    directory, ids, ref = hf_qwen35
    with safe_open(str(directory / "model.safetensors"), "pt") as f:
        tensors = {k.replace("model.", "model.language_model.", 1) if k.startswith("model.") else k: f.get_tensor(k)
                   for k in f.keys()}
    tensors["model.visual.patch_embed.proj.weight"] = torch.zeros(2, 2)
    tensors["mtp.fc.weight"] = torch.zeros(2, 2)
    save_file(tensors, str(tmp_path / "model.safetensors"))
    text = json.loads((directory / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3_5", "text_config": text,
                                                      "vision_config": {"depth": 1}}))
    ByteTokenizer().save(tmp_path)
    backbone = build(BackboneConfig(name="q", arch="qwen35", pretrained=str(tmp_path), device="cpu"))
    torch.testing.assert_close(backbone.forward(backbone.init_state(), ids), ref[-1], atol=2e-4, rtol=2e-4)


def test_rope_override_switches_yarn_and_nothing_else(hf_qwen35):
    directory, ids, ref = hf_qwen35
    plain_rope = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}
    backbone = build(BackboneConfig(name="q", arch="qwen35", pretrained=str(directory), device="cpu",
                                    model={"rope_parameters": plain_rope}))
    assert backbone.rope.attention_scaling == 1.0
    assert not torch.allclose(backbone.forward(backbone.init_state(), ids), ref[-1], atol=1e-3)
    with pytest.raises(ConfigError, match="backbone.model.hidden_size"):
        build(BackboneConfig(name="q", arch="qwen35", pretrained=str(directory), device="cpu",
                             model={"hidden_size": 64}))


def test_chat_prompt_uses_the_checkpoint_template(hf_qwen35, tmp_path):
    directory, _, _ = hf_qwen35
    template = ("{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}"
                "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- if enable_thinking is defined and "
                "enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}{%- endif %}")
    for f in directory.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": template}))
    backbone = build(BackboneConfig(name="q", arch="qwen35", pretrained=str(tmp_path), device="cpu"))
    assert backbone.chat_prompt("Hi?") == "<|im_start|>user\nHi?<|im_end|><|im_start|>assistant<think>\n\n</think>\n\n"
    with pytest.raises(BackboneLoadError, match="chat template"):
        tiny().chat_prompt("Hi?")


def test_offline_hub_id_fails_clearly(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(BackboneLoadError, match="Qwen/Qwen3.5-9B"):
        build(BackboneConfig(name="qwen35_9b", arch="qwen35", pretrained="Qwen/Qwen3.5-9B", device="cpu"))


def test_backbone_options():
    """backbone=qwen35_9b turns on the official YaRN setup; the tiny option builds."""
    from omegaconf import OmegaConf

    from memexp.backbones import BACKBONE_OPTIONS, load_backbone

    option = OmegaConf.load(BACKBONE_OPTIONS / "qwen35_9b.yaml")
    assert option.pretrained == "Qwen/Qwen3.5-9B" and option.arch == "qwen35"
    rope = OmegaConf.to_container(option.model.rope_parameters)
    assert (rope["rope_type"], rope["factor"], rope["original_max_position_embeddings"]) == ("yarn", 4.0, 262144)
    backbone = load_backbone("tiny_qwen35_random")
    assert len(backbone.channels) == 6 and backbone.config.layer_types.count("full_attention") == 1
