"""Qwen3.5 hybrid: parity with transformers' Qwen3_5ForCausalLM on its torch path (run in a
subprocess with FLA hidden, since transformers picks FLA's GPU kernels whenever FLA
imports), the vision-language checkpoint layout, YaRN override, exact continuation with
attention positions, independent clones, GDN-only channels, chat template, methods."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from backbone_checks import branch_and_continue, check_method_end_to_end, feed, pieces_of
from safetensors import safe_open
from safetensors.torch import save_file

from memexp.backbones.hybrid.model import build
from memexp.backbones.loading import BackboneLoadError
from memexp.backbones.tokenizer import ByteTokenizer
from memexp.config import BackboneConfig, ConfigError

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


@pytest.mark.parametrize("cuts", [[1, 1, 1, 37], [2, 38], [11, 6, 23], [20, 20]])
def test_continuation_is_exact(cuts):
    """Splits inside the conv window (1, 2 tokens), across GDN chunks and prefill chunks, and
    attention positions continuing across calls."""
    backbone = tiny(prefill_chunk=9)
    ids = torch.randint(0, 300, (40,))
    whole, s_whole = feed(backbone, [ids])
    split, s_split = feed(backbone, pieces_of(ids, cuts))
    torch.testing.assert_close(split, whole, atol=1e-5, rtol=1e-5)
    for a, b in zip(s_split.recurrent + s_split.conv, s_whole.recurrent + s_whole.conv):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(s_split.kv[3].k[:, :40], s_whole.kv[3].k[:, :40], atol=1e-5, rtol=1e-5)


def test_positions_continue_from_the_context():
    """A question read after the context sees positions 40.., not 0.. (the last token's
    logits differ from a state whose position counter was not advanced)."""
    backbone = tiny()
    ids = torch.randint(0, 300, (44,))
    _, state = feed(backbone, [ids[:40]])
    follows = backbone.forward(state.clone(), ids[40:])
    restarted = state.clone()
    restarted.position = 0
    assert not torch.allclose(backbone.forward(restarted, ids[40:]), follows, atol=1e-4)
    torch.testing.assert_close(follows, backbone.forward(backbone.init_state(), ids), atol=1e-5, rtol=1e-5)


def test_clone_branches_are_independent():
    base, branch = branch_and_continue(tiny())
    assert branch.position == 25 and base.kv[3].length == 30 and branch.kv[3].length == 25


def test_channels_and_observer_cover_gdn_layers_only():
    backbone = tiny(prefill_chunk=6)
    assert [(c.layer, c.head, c.d_k) for c in backbone.channels] == [(layer, h, 8) for layer in range(3) for h in range(2)]
    calls = []
    backbone.forward(backbone.init_state(), torch.randint(0, 300, (8,)),
                     observer=lambda layer, start, k, q: calls.append((layer, start, k.shape, q.norm(dim=-1))))
    assert [(c[0], c[1], tuple(c[2])) for c in calls] == [(layer, 0, (6, 2, 8)) for layer in range(3)] + \
        [(layer, 6, (2, 2, 8)) for layer in range(3)]
    assert all(((c[3] > 0.5) & (c[3] <= 1 + 1e-5)).all() for c in calls)  # l2_norm's eps sits inside the sqrt


def test_rescale_scales_gdn_states_only():
    backbone = tiny()
    _, state = feed(backbone, [torch.randint(0, 300, (12,))])
    keys = state.kv[3].k[:, :12].clone()
    windows = [w.clone() for w in state.conv if w is not None]
    state.scale_recurrent(0.0)
    assert all(torch.count_nonzero(s) == 0 for s in state.recurrent if s is not None)
    assert torch.equal(state.kv[3].k[:, :12], keys) and state.position == 12
    assert all(torch.equal(a, b) for a, b in zip([w for w in state.conv if w is not None], windows))


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


@pytest.mark.parametrize("method", ["plain", "notebank"])
def test_methods_run_end_to_end(method):
    memory, context = check_method_end_to_end(tiny(), method)
    assert memory.state.position == len(context)


def test_backbone_options():
    """backbone=qwen35_9b turns on the official YaRN setup; the tiny option builds."""
    from omegaconf import OmegaConf

    from memexp.backbones import CONF_DIR, load_backbone

    option = OmegaConf.load(CONF_DIR / "qwen35_9b.yaml")
    assert option.pretrained == "Qwen/Qwen3.5-9B" and option.arch == "qwen35"
    rope = OmegaConf.to_container(option.model.rope_parameters)
    assert (rope["rope_type"], rope["factor"], rope["original_max_position_embeddings"]) == ("yarn", 4.0, 262144)
    backbone = load_backbone("tiny_qwen35_random")
    assert len(backbone.channels) == 6 and backbone.config.layer_types.count("full_attention") == 1
