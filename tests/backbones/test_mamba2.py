"""Mamba-2: parity with transformers' Mamba2ForCausalLM (torch path), mamba_ssm-format and
Megatron loading, the SSD op and its kernels. The contract every architecture meets
(continuation, clones, rescale, observer, generate, methods) is checked in test_contract.py."""

from __future__ import annotations

import json
import math

import kernel_stand_ins
import pytest
import torch
from kernel_stand_ins import on_torch

from memexp.backbones.loading import BackboneLoadError
from memexp.backbones.mamba2.model import Mamba2Config, build
from memexp.backbones.tokenizer import ByteTokenizer
from memexp.core.schema import BackboneConfig
from memexp.kernels.ssd import ssd

TINY = dict(hidden_size=32, num_hidden_layers=2, num_heads=4, head_dim=16, state_size=8, n_groups=2,
            vocab_size=300, chunk_size=8)


def tiny(prefill_chunk: int = 2048, **model) -> object:
    return build(BackboneConfig(name="tiny_mamba2", arch="mamba2", device="cpu", tokenizer="byte",
                                prefill_chunk=prefill_chunk, model={**TINY, **model}))


@pytest.fixture(scope="module")
def hf_checkpoint(tmp_path_factory):
    """A tiny transformers Mamba2ForCausalLM (every weight perturbed off its init) saved
    with save_pretrained, plus its reference logits over a fixed sequence."""
    from transformers import Mamba2Config as HFConfig
    from transformers import Mamba2ForCausalLM

    torch.manual_seed(0)
    model = Mamba2ForCausalLM(HFConfig(**TINY, expand=2, tie_word_embeddings=True)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    directory = tmp_path_factory.mktemp("hf_mamba2")
    model.save_pretrained(directory)
    ByteTokenizer().save(directory)
    ids = torch.randint(0, TINY["vocab_size"], (1, 41))
    with torch.no_grad():
        logits = model(ids).logits[0]
    return directory, model, ids[0], logits


@pytest.mark.parametrize("cuts", [[41], [1, 2, 38], [3, 9, 29], [20, 21]])
def test_logits_match_transformers(hf_checkpoint, cuts):
    directory, _, ids, ref = hf_checkpoint
    backbone = build(BackboneConfig(name="m", arch="mamba2", pretrained=str(directory), device="cpu", prefill_chunk=16))
    state, end = backbone.init_state(), 0
    for n in cuts:
        logits = backbone.forward(state, ids[end:end + n])
        end += n
        torch.testing.assert_close(logits, ref[end - 1], atol=1e-4, rtol=1e-4)
    assert state.position == ids.numel()


def test_reads_mamba_ssm_format(hf_checkpoint, tmp_path):
    """mamba_ssm's config.json (d_model, n_layer, ssm_cfg, padded vocab) and state dict
    (`backbone.embedding.weight`, pytorch_model.bin) give the same logits."""
    _, model, ids, ref = hf_checkpoint
    state_dict = {k.replace("backbone.embeddings.", "backbone.embedding."): v.clone() for k, v in model.state_dict().items()}
    torch.save(state_dict, tmp_path / "pytorch_model.bin")
    config = {
        "d_model": TINY["hidden_size"], "d_intermediate": 0, "n_layer": TINY["num_hidden_layers"],
        "vocab_size": 290, "pad_vocab_size_multiple": 20, "rms_norm": True, "residual_in_fp32": True,
        "fused_add_norm": True, "tie_embeddings": True, "attn_layer_idx": [], "attn_cfg": {},
        "ssm_cfg": {"layer": "Mamba2", "d_state": TINY["state_size"], "headdim": TINY["head_dim"],
                    "ngroups": TINY["n_groups"], "chunk_size": 4},
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    ByteTokenizer().save(tmp_path)
    backbone = build(BackboneConfig(name="m", arch="mamba2", pretrained=str(tmp_path), device="cpu"))
    assert backbone.config.vocab_size == 300 and backbone.config.n_groups == 2
    torch.testing.assert_close(backbone.forward(backbone.init_state(), ids), ref[-1], atol=1e-4, rtol=1e-4)


def test_mamba_ssm_mlp_layers_are_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"d_model": 32, "n_layer": 1, "vocab_size": 300,
                                                      "d_intermediate": 64, "ssm_cfg": {"layer": "Mamba2"}}))
    with pytest.raises(BackboneLoadError, match="d_intermediate"):
        Mamba2Config.from_dict(json.loads((tmp_path / "config.json").read_text()))


def test_ssd_chunked_equals_recurrent_with_initial_state():
    torch.manual_seed(1)
    x, dt = torch.randn(1, 37, 4, 8), torch.randn(1, 37, 4)
    B, C = torch.randn(1, 37, 2, 16), torch.randn(1, 37, 2, 16)
    A, D, bias, h0 = -torch.rand(4) * 4, torch.randn(4), torch.randn(4), torch.randn(1, 4, 8, 16)
    y1, s1 = ssd(x, dt, A, B, C, D, bias, initial_state=h0, form="recurrent")
    y2, s2 = ssd(x, dt, A, B, C, D, bias, initial_state=h0, form="chunk", chunk_size=8)
    torch.testing.assert_close(y1, y2, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(s1, s2, atol=1e-4, rtol=1e-4)


def test_offline_hub_id_fails_clearly(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(BackboneLoadError, match="state-spaces/mamba2-1.3b"):
        build(BackboneConfig(name="mamba2", arch="mamba2", pretrained="state-spaces/mamba2-1.3b", device="cpu"))


def test_megatron_conversion_loads(hf_checkpoint, tmp_path):
    """scripts/convert/mamba2_megatron.py: Megatron names, Transformer Engine extra state,
    a norm fused into in_proj and the saved Megatron args give a mamba_ssm directory that
    loads with the same logits (ngroups from the args, untied output layer)."""
    import argparse
    import subprocess
    import sys
    from pathlib import Path

    _, model, ids, ref = hf_checkpoint
    sd = {}
    for name, t in model.state_dict().items():
        name = (name.replace("backbone.embeddings.weight", "embedding.word_embeddings.weight")
                .replace("backbone.norm_f.weight", "decoder.final_norm.weight")
                .replace("lm_head.weight", "output_layer.weight")
                .replace("backbone.layers.", "decoder.layers."))
        if name.endswith(".norm.weight") and ".mixer." not in name:
            name = name.replace(".norm.weight", ".mixer.in_proj.layer_norm_weight")
        sd[name] = t.clone()
    sd["decoder.layers.0.mixer.in_proj._extra_state"] = torch.tensor([1, 2, 3], dtype=torch.uint8)
    megatron = tmp_path / "release" / "mp_rank_00"
    megatron.mkdir(parents=True)
    torch.save({"model": sd, "args": argparse.Namespace(mamba_num_groups=2), "iteration": 1},
               megatron / "model_optim_rng.pt")
    tok = tmp_path / "tok"
    ByteTokenizer().save(tok)
    out = tmp_path / "converted"
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, str(root / "scripts" / "convert" / "mamba2_megatron.py"),
                    str(megatron / "model_optim_rng.pt"), str(out), "--tokenizer", str(tok), "--ngroups", "8"],
                   check=True, capture_output=True, timeout=300)
    config = json.loads((out / "config.json").read_text())
    assert config["ssm_cfg"]["ngroups"] == 2 and config["ssm_cfg"]["d_state"] == TINY["state_size"]
    backbone = build(BackboneConfig(name="m8", arch="mamba2", pretrained=str(out), device="cpu"))
    torch.testing.assert_close(backbone.forward(backbone.init_state(), ids), ref[-1], atol=1e-4, rtol=1e-4)


def test_backbone_options():
    """backbone=mamba2 / mamba2_8b name the paper's checkpoints; the tiny option builds."""
    from omegaconf import OmegaConf

    from memexp.backbones import BACKBONE_OPTIONS, load_backbone

    assert OmegaConf.load(BACKBONE_OPTIONS / "mamba2.yaml").pretrained == "state-spaces/mamba2-1.3b"
    eight = OmegaConf.load(BACKBONE_OPTIONS / "mamba2_8b.yaml")
    assert eight.arch == "mamba2" and eight.pretrained.endswith("mamba2-8b-3t-4k")
    backbone = load_backbone("tiny_mamba2_random")
    assert backbone.config.n_groups == 2 and len(backbone.channels) == 4


@pytest.fixture
def mamba_ssm_stand_in(monkeypatch):
    """`ssd`'s CUDA branch routed, on CPU, to stand-ins of mamba_ssm's two kernels
    (kernel_stand_ins.py). Yields the calls made."""
    return kernel_stand_ins.install(monkeypatch, libraries=("mamba_ssm",))


@pytest.mark.parametrize("T, limit, kernel", [(21, (0.0, math.inf), "chunk:21"), (1, (0.0, math.inf), "step"),
                                              (1, (0.0, 0.5), "chunk:1")])
def test_ssd_kernel_calls_follow_mamba_ssm(mamba_ssm_stand_in, T, limit, kernel):
    """Chunks go to mamba_chunk_scan_combined, decode tokens to selective_state_update
    (which has no dt_limit: a limited model stays on the chunk kernel); both pass raw dt once,
    carry the initial state without writing it, and give the reference's output and state."""
    torch.manual_seed(2)
    x, dt = torch.randn(1, T, 4, 8), torch.randn(1, T, 4)
    B, C = torch.randn(1, T, 2, 16), torch.randn(1, T, 2, 16)
    A, D, bias, h0 = -torch.rand(4) * 4, torch.randn(4), torch.randn(4), torch.randn(1, 4, 8, 16)
    before = h0.clone()
    y_k, s_k = ssd(x, dt, A, B, C, D, bias, dt_limit=limit, initial_state=h0)
    assert mamba_ssm_stand_in == [kernel] and torch.equal(h0, before)
    y_t, s_t = on_torch(lambda: ssd(x, dt, A, B, C, D, bias, dt_limit=limit, initial_state=h0))
    assert mamba_ssm_stand_in == [kernel]
    torch.testing.assert_close(y_k, y_t, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(s_k, s_t, atol=1e-5, rtol=1e-5)


def test_megatron_sentencepiece_tokenizer_converts(tmp_path):
    """mamba2-8b ships a bare SentencePiece .model; the conversion script installs it with a
    Llama-style config and a tokenizer.json that memexp loads without sentencepiece, encoding
    as SentencePiece itself does (byte fallback, digits split, no BOS added). Strings that
    start with a space differ by one dummy-prefix piece, as transformers' own tokenizer does."""
    import importlib.util
    from pathlib import Path

    spm = pytest.importorskip("sentencepiece")
    from memexp.backbones.loading import load_tokenizer

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"Line {i}: the quick brown fox jumps over the lazy dog, item {7 * i + 3}. Ünïcödé"
                                for i in range(200)))
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(tmp_path / "sp"), vocab_size=400,
                                   model_type="bpe", byte_fallback=True, split_digits=True,
                                   normalization_rule_name="identity", remove_extra_whitespaces=False,
                                   unk_id=0, bos_id=1, eos_id=2, minloglevel=2)
    script = Path(__file__).resolve().parents[2] / "scripts" / "convert" / "mamba2_megatron.py"
    spec = importlib.util.spec_from_file_location("convert_mamba2_megatron", script)
    convert = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(convert)
    out = tmp_path / "converted"
    out.mkdir()
    assert convert.write_tokenizer(tmp_path / "sp.model", out) == ["tokenizer.json", "tokenizer.model",
                                                                    "tokenizer_config.json"]
    tok = load_tokenizer(None, out)
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "sp.model"))
    assert (tok.vocab_size, tok.bos_id, tok.stop_ids) == (400, 1, [2])
    for text in ["Hello world", "Line 12: the fox.\nNext  line", "日本語 ok", "tab\tand\n\nnewlines 2026"]:
        assert tok.encode(text) == sp.encode(text), text
        assert tok.decode(tok.encode(text)) == text
    assert tok.encode(" x") == sp.encode(" x")[1:]


def test_cuda_path_rehearsal_on_cpu(monkeypatch):
    """The whole Mamba-2 CUDA path with stand-ins of causal-conv1d and mamba_ssm: a tiny
    model (xBC conv of 96 channels) prefilled in pieces, then decoded token by token, calls
    causal_conv1d_fn / _update, mamba_chunk_scan_combined and selective_state_update with the
    mixer's real tensors and gives the torch path's logits."""
    calls = kernel_stand_ins.install(monkeypatch)
    backbone = tiny(prefill_chunk=16, head_dim=16, num_heads=4)
    ids = torch.randint(0, 300, (45,), generator=torch.Generator().manual_seed(1))

    def run():
        state, out = backbone.init_state(), []
        for a, b in [(0, 20), (20, 37)] + [(t, t + 1) for t in range(37, 45)]:
            out.append(backbone.forward(state, ids[a:b]))
        return torch.stack(out)

    on_kernels = run()
    assert {"fn:16", "update:1", "chunk:16", "step"} <= set(calls)
    calls.clear()
    torch.testing.assert_close(on_kernels, on_torch(run), atol=1e-5, rtol=1e-5)
    assert calls == []


@pytest.mark.gpu
@pytest.mark.parametrize("T", [1, 300])
def test_mamba_ssm_kernels_match_reference(T):
    """On CUDA with mamba_ssm: the chunk scan and the decode step against the reference."""
    pytest.importorskip("mamba_ssm")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    torch.manual_seed(0)
    dev = "cuda"
    x, dt = torch.randn(1, T, 8, 64, device=dev), torch.randn(1, T, 8, device=dev)
    B, C = torch.randn(1, T, 2, 128, device=dev), torch.randn(1, T, 2, 128, device=dev)
    A, D, bias = -torch.rand(8, device=dev) * 4, torch.randn(8, device=dev), torch.randn(8, device=dev)
    h0 = torch.randn(1, 8, 64, 128, device=dev)
    y_k, s_k = ssd(x, dt, A, B, C, D, bias, initial_state=h0)
    y_t, s_t = on_torch(lambda: ssd(x, dt, A, B, C, D, bias, initial_state=h0))
    torch.testing.assert_close(y_k, y_t, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(s_k, s_t, atol=1e-3, rtol=1e-3)
