"""Attention backbones (Llama-3.2, the FLA Transformer baseline): parity with transformers'
Llama (and Mistral for the sliding window), FLA-format loading, continuation and Plain under
a sliding window. The contract every architecture meets (continuation, clones, rescale,
observer, generate, methods) is checked in test_contract.py."""

from __future__ import annotations

import json

import pytest
import torch
from backbone_checks import feed, pieces_of
from safetensors.torch import save_file

from memexp.backbones.attention.model import build
from memexp.backbones.loading import BackboneLoadError
from memexp.backbones.rotary import build_rope
from memexp.backbones.tokenizer import ByteTokenizer
from memexp.core.schema import BackboneConfig
from memexp.kernels.attention import attention, attention_ref

TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
            intermediate_size=64, vocab_size=300, rms_norm_eps=1e-5, max_position_embeddings=64)
LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 4.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 16}


def tiny(prefill_chunk: int = 2048, window: int | None = None, **model):
    return build(BackboneConfig(name="tiny_llama", arch="llama", device="cpu", tokenizer="byte", window=window,
                                prefill_chunk=prefill_chunk, model={**TINY, **model}))


def perturbed(model):
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model.eval()


@pytest.fixture(scope="module")
def hf_llama(tmp_path_factory):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(**TINY, rope_parameters=LLAMA3_ROPE, tie_word_embeddings=True, attn_implementation="eager")
    model = perturbed(LlamaForCausalLM(config))
    directory = tmp_path_factory.mktemp("hf_llama")
    model.save_pretrained(directory)
    ByteTokenizer().save(directory)
    ids = torch.randint(0, TINY["vocab_size"], (1, 37))
    with torch.no_grad():
        logits = model(ids).logits[0]
    return directory, model, ids[0], logits


@pytest.mark.parametrize("cuts", [[37], [1, 36], [5, 1, 1, 30], [18, 19]])
def test_logits_match_transformers_llama(hf_llama, cuts):
    """Llama-3 rope scaling, grouped KV heads, tied embeddings; continuation keeps positions."""
    directory, _, ids, ref = hf_llama
    backbone = build(BackboneConfig(name="l", arch="llama", pretrained=str(directory), device="cpu", prefill_chunk=8))
    state, end = backbone.init_state(), 0
    for piece in pieces_of(ids, cuts):
        logits = backbone.forward(state, piece)
        end += piece.numel()
        torch.testing.assert_close(logits, ref[end - 1], atol=1e-4, rtol=1e-4)
    assert state.position == 37 and state.kv[0].length == 37


def test_sliding_window_matches_transformers_mistral(tmp_path):
    """backbone.window=W: each query sees the last W positions, itself included, exactly as
    transformers' sliding-window attention (Mistral has Llama's weights and layout)."""
    from transformers import MistralConfig, MistralForCausalLM

    config = MistralConfig(**TINY, rope_theta=10000.0, sliding_window=5, tie_word_embeddings=False,
                           attn_implementation="eager")
    model = perturbed(MistralForCausalLM(config))
    model.save_pretrained(tmp_path)
    ByteTokenizer().save(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg.update(model_type="llama", architectures=["LlamaForCausalLM"])
    cfg.pop("sliding_window")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    ids = torch.randint(0, 300, (1, 23))
    with torch.no_grad():
        ref = model(ids).logits[0]
    backbone = build(BackboneConfig(name="sw", arch="llama", pretrained=str(tmp_path), device="cpu", window=5,
                                    prefill_chunk=4))
    state, end = backbone.init_state(), 0
    for piece in pieces_of(ids[0], [3, 1, 11, 8]):
        logits = backbone.forward(state, piece)
        end += piece.numel()
        torch.testing.assert_close(logits, ref[end - 1], atol=1e-4, rtol=1e-4)
        assert state.kv[0].length == min(end, 4)


def test_reads_fla_transformer_format(hf_llama, tmp_path):
    """FLA's Transformer checkpoints (the M-A-P 1.3B baseline) load onto the same model."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**{**TINY, "num_key_value_heads": 2, "intermediate_size": 256}, rope_theta=10000.0,
                         attn_implementation="eager")
    model = perturbed(LlamaForCausalLM(config))
    rename = {"model.embed_tokens.": "model.embeddings.", ".input_layernorm.": ".attn_norm.",
              ".post_attention_layernorm.": ".mlp_norm.", ".self_attn.": ".attn."}
    tensors = {}
    for name, t in model.state_dict().items():
        for a, b in rename.items():
            name = name.replace(a, b)
        tensors[name] = t.contiguous()
    save_file(tensors, str(tmp_path / "model.safetensors"))
    fla = {"model_type": "transformer", "hidden_size": 32, "num_hidden_layers": 2, "num_heads": 4, "num_kv_heads": 2,
           "qkv_bias": False, "qk_norm": False, "window_size": None, "rope_theta": 10000.0,
           "max_position_embeddings": 64, "hidden_ratio": 4, "intermediate_size": None, "hidden_act": "swish",
           "norm_eps": 1e-5, "tie_word_embeddings": False, "vocab_size": 300, "bos_token_id": 256, "eos_token_id": 257}
    (tmp_path / "config.json").write_text(json.dumps(fla))
    ByteTokenizer().save(tmp_path)
    backbone = build(BackboneConfig(name="t", arch="llama", pretrained=str(tmp_path), device="cpu"))
    assert backbone.config.intermediate_size == 256
    ids = torch.randint(0, 300, (1, 19))
    with torch.no_grad():
        ref = model(ids).logits[0, -1]
    torch.testing.assert_close(backbone.forward(backbone.init_state(), ids[0]), ref, atol=1e-4, rtol=1e-4)


def test_attention_op_matches_reference_with_cache_and_window():
    torch.manual_seed(0)
    k, v = torch.randn(1, 12, 2, 8), torch.randn(1, 12, 2, 8)
    for tq in (5, 12):  # a chunk after cached keys; a fresh prefill (torch's own causal mask)
        q = torch.randn(1, tq, 4, 8)
        for window in (None, 1, 4, 12, 30):
            torch.testing.assert_close(attention(q, k, v, window=window), attention_ref(q, k, v, window=window),
                                       atol=1e-5, rtol=1e-5)


def test_yarn_frequencies_match_transformers():
    from transformers import Qwen3_5TextConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    rope = {"rope_type": "yarn", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25, "factor": 4.0,
            "original_max_position_embeddings": 262144, "mrope_section": [11, 11, 10], "mrope_interleaved": True}
    config = Qwen3_5TextConfig(head_dim=256, rope_parameters=rope, max_position_embeddings=1048576)
    inv_freq, scaling = ROPE_INIT_FUNCTIONS["yarn"](config, "cpu")
    ours = build_rope(256, 1e7, 0.25, rope, 1048576)
    torch.testing.assert_close(ours.inv_freq, inv_freq)
    assert ours.attention_scaling == pytest.approx(scaling)


@pytest.mark.parametrize("cuts", [[1, 1, 28], [7, 23], [13, 4, 13]])
def test_continuation_is_exact_under_a_sliding_window(cuts):
    """Full attention: test_contract.py. A window of 6 keeps 5 tokens between calls."""
    window = 6
    backbone = tiny(prefill_chunk=5, window=window)
    ids = torch.randint(0, 300, (30,))
    whole, s_whole = feed(backbone, [ids])
    split, s_split = feed(backbone, pieces_of(ids, cuts))
    torch.testing.assert_close(split, whole, atol=1e-5, rtol=1e-5)
    assert s_split.position == s_whole.position == 30
    for a, b in zip(s_split.kv, s_whole.kv):
        assert a.length == b.length == window - 1
        torch.testing.assert_close(a.k[:, :a.length], b.k[:, :b.length], atol=1e-5, rtol=1e-5)


def test_offline_hub_id_fails_clearly(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(BackboneLoadError, match="meta-llama/Llama-3.2-1B-Instruct"):
        build(BackboneConfig(name="llama32_1b", arch="llama", pretrained="meta-llama/Llama-3.2-1B-Instruct",
                             device="cpu"))


def test_plain_runs_end_to_end_under_a_sliding_window():
    """Plain reads a context longer than the window and answers (without a window, and
    NoteBank's refusal: test_contract.py)."""
    from memexp.core.types import Question
    from memexp.methods import build_method
    from memexp.methods.plain.config import PlainConfig

    backbone = tiny(window=48)
    tok = backbone.tokenizer
    context = tok.encode(" ".join(f"Fact {i}: the code for item {i} is {7 * i + 3}." for i in range(8)), add_bos=True)
    question = Question(id="q", prompt="What is the code for item 4?", references=["31"], metric="string_match",
                        max_new_tokens=4)
    plain = build_method(PlainConfig())
    memory = plain.read(backbone, context)
    answer = plain.answer(backbone, memory, tok.encode(question.prompt), question)
    assert 1 <= len(answer.ids) <= 4 and memory.state.position == len(context) > 48


def test_backbone_options():
    from omegaconf import OmegaConf

    from memexp.backbones import BACKBONE_OPTIONS, load_backbone

    assert OmegaConf.load(BACKBONE_OPTIONS / "llama32_1b.yaml").pretrained == "meta-llama/Llama-3.2-1B-Instruct"
    baseline = OmegaConf.load(BACKBONE_OPTIONS / "transformer_1b.yaml")
    assert baseline.pretrained == "m-a-p/transformer_1.3B_baseline" and baseline.arch == "llama"
    assert load_backbone({**OmegaConf.to_container(OmegaConf.load(BACKBONE_OPTIONS / "tiny_llama_random.yaml")),
                          "window": 4096}).window == 4096


def test_instruct_checkpoint_chat_template(hf_llama, tmp_path):
    """Llama-3.2-Instruct ships a chat template in tokenizer_config.json; chat_prompt renders it,
    and a checkpoint without one says so."""
    directory, _, _, _ = hf_llama
    template = ("<|begin_of_text|>{%- for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
                "{{ m.content }}<|eot_id|>{%- endfor %}"
                "{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")
    for f in directory.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": template}))
    backbone = build(BackboneConfig(name="l", arch="llama", pretrained=str(tmp_path), device="cpu"))
    assert backbone.chat_prompt("Hi?", system="Be brief.") == (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
    with pytest.raises(BackboneLoadError, match="chat template"):
        build(BackboneConfig(name="l", arch="llama", pretrained=str(directory), device="cpu")).chat_prompt("Hi?")
