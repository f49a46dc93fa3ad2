"""Retrofit: the trainable parameter count at Llama-3.2-1B shapes, frozen backbone, the modules'
file and its mismatch errors, the converter from the authors' names, config errors."""

import pytest
import torch
from titan_helpers import SEGMENT, authors_checkpoint, ids, tiny_llama, titan

from memexp.backbones.attention.model import AttentionBackbone, AttentionConfig, LlamaForCausalLM
from memexp.core.compose import load_config
from memexp.core.schema import ConfigError
from memexp.methods.titan.config import TitanConfig
from memexp.methods.titan.convert import ConvertError, convert, main
from memexp.methods.titan.retrofit import TitanModules, retrofit

LLAMA32_1B = AttentionConfig(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                             head_dim=64, intermediate_size=8192, vocab_size=128256, tie_word_embeddings=True)


def meta_llama32_1b():
    with torch.device("meta"):
        model = LlamaForCausalLM(LLAMA32_1B)
    return AttentionBackbone(model, tokenizer=None, name="llama32_1b_meta", prefill_chunk=4096)


def test_trainable_parameters_at_llama32_1b_shapes_are_the_papers_17_23m():
    # by hand, per Titan layer (paper App. A.2 and the code's shapes): the gate Linear 2048 -> 32 * 64
    # with bias; 8 KV-head memories of three 64 x 64 matrices; theta, eta, alpha: Linear 8 * 64 -> 8
    gate = 2048 * 2048 + 2048
    memories = 8 * 3 * 64 * 64
    rates = 3 * (512 * 8 + 8)
    assert 4 * (gate + memories + rates) == 17_227_872
    bb = meta_llama32_1b()
    modules = retrofit(bb, TitanConfig(value_residual=False))
    assert sum(p.numel() for p in modules.parameters()) == 17_227_872
    with_mixers = retrofit(meta_llama32_1b(), TitanConfig())
    assert sum(p.numel() for p in with_mixers.parameters()) == 17_227_872 + 3 * (2048 * 8 + 8)  # layers 1-3 only
    assert sum(p.requires_grad for p in bb.model.parameters()) == len(list(modules.parameters()))


def test_retrofit_keeps_the_backbones_tensor_names():
    plain = {n for n, _ in tiny_llama().model.named_parameters()}
    bb, modules = titan(layers=2)
    names = {n for n, _ in bb.model.named_parameters()}
    assert plain <= names
    titan_names = {"model.layers.{1}.titan.{2}".format(*k.split(".", 2)) for k, _ in modules.named_parameters()}
    assert names - plain == titan_names and len(titan_names) == len(list(modules.parameters()))


def test_saved_modules_load_back_and_change_nothing(tmp_path):
    x = ids(3 * SEGMENT)
    bb, modules = titan()
    want = bb.forward(bb.init_state(), x)
    modules.save(tmp_path / "titan")
    other, other_modules = titan(module_seed=5)
    assert (other.forward(other.init_state(), x) - want).abs().max() > 1e-4
    other_modules.load(tmp_path / "titan")
    torch.testing.assert_close(other.forward(other.init_state(), x), want, rtol=0, atol=0)


@pytest.mark.parametrize("fields, message", [
    ({"layers": 2}, r"saved with layers=3, this run has layers=2$"),
    ({"value_residual": False}, r"saved with value_residual=True, this run has value_residual=False$"),
    ({"segment_length": 16}, r"saved with segment_length=8, this run has segment_length=16$"),
])
def test_loading_modules_of_another_config_is_one_line_error(tmp_path, fields, message):
    _, modules = titan()
    modules.save(tmp_path)
    _, other = titan(**fields)
    with pytest.raises(ConfigError, match=r"^method\.memory_path='.*': " + message):
        other.load(tmp_path)


def test_loading_modules_of_other_shapes_is_one_line_error(tmp_path):
    cfg = TitanConfig(layers=1, segment_length=8, test_batch=16)
    TitanModules(cfg, {"hidden_size": 64, "num_attention_heads": 4, "kv_heads": 2, "head_dim": 16,
                       "num_hidden_layers": 3}).save(tmp_path)
    wide = TitanModules(cfg, {"hidden_size": 64, "num_attention_heads": 4, "kv_heads": 4, "head_dim": 16,
                              "num_hidden_layers": 3})
    with pytest.raises(ConfigError, match=r"saved with kv_heads=2, this run has kv_heads=4$"):
        wide.load(tmp_path)
    with pytest.raises(ConfigError, match=r"not a Titan modules folder"):
        wide.load(tmp_path / "nowhere")


def test_retrofit_refuses_what_it_cannot_convert():
    with pytest.raises(ConfigError, match=r"^method\.layers=4: the backbone has only 3 layers$"):
        retrofit(tiny_llama(), TitanConfig(layers=4))
    bb, _ = titan()
    with pytest.raises(ConfigError, match=r"not a Llama-style attention backbone with untouched layers"):
        retrofit(bb, TitanConfig())


def test_converter_maps_the_authors_names_onto_memexps(tmp_path):
    ckpt = authors_checkpoint()
    torch.save(ckpt, tmp_path / "latest_checkpoint.pt")
    main([str(tmp_path / "latest_checkpoint.pt"), str(tmp_path / "out"), "--num-layers", "3",
          "--segment-length", "8", "--test-batch", "16"])
    bb, modules = titan(module_seed=9)
    modules.load(tmp_path / "out")
    sd, blocks = ckpt["model_state_dict"], modules.layers
    for i in range(3):
        p, m = f"backbone.model.layers.{i}.", blocks[str(i)]
        for j, w in enumerate((m.memory.w1, m.memory.w2, m.memory.w3)):
            assert torch.equal(w, sd[p + f"neural_memory.memory_model_parameters.{j}"])
        assert torch.equal(m.memory.theta.weight, sd[p + "neural_memory.to_adaptive_step.0.weight"])
        assert torch.equal(m.memory.eta.bias, sd[p + "neural_memory.to_momentum.0.bias"])
        assert torch.equal(m.memory.alpha.weight, sd[p + "neural_memory.to_decay_factor.0.weight"])
        assert torch.equal(m.gate.weight, sd[p + "neural_memory.history_mix_proj.weight"])
        assert torch.equal(m.gate.bias.view(4, 16), sd[p + "neural_memory.history_mix"])
        if i:
            assert torch.equal(m.value_mix.weight, sd[p + "segmented_attn.to_learned_v_mix.0.weight"])
    assert blocks["0"].value_mix is None


def test_converter_errors_are_one_line(tmp_path):
    ckpt = authors_checkpoint(value_mix=False)
    ckpt["model_state_dict"]["backbone.model.layers.0.neural_memory.retrieve_gate.0.weight"] = torch.zeros(1)
    torch.save(ckpt, tmp_path / "odd.pt")
    with pytest.raises(ConvertError, match=r"retrieve_gate\.0\.weight: no memexp counterpart"):
        convert(tmp_path / "odd.pt", tmp_path / "out", 3)
    torch.save({"step": 1}, tmp_path / "empty.pt")
    with pytest.raises(SystemExit, match=r"^error: .*found no state dict"):
        main([str(tmp_path / "empty.pt"), str(tmp_path / "out")])
    # the code's segmented-only layers carry an unused memory: --layers drops it
    torch.save(authors_checkpoint(value_mix=False), tmp_path / "c1.pt")
    out = convert(tmp_path / "c1.pt", tmp_path / "c1", 3, layers=1, local_later_layers=True, segment_length=8,
                  test_batch=16)
    _, modules = titan(layers=1, local_later_layers=True, value_residual=False)
    modules.load(out)


@pytest.mark.parametrize("override, message", [
    ("method.test_batch=12", r"^method\.test_batch=12: must be a multiple of method\.segment_length=8"),
    ("method.decay_target=none", r"^method\.decay_target='none': allowed values are slow_weights, zero$"),
    ("method.layers=0", r"^method\.layers=0: must be an integer >= 1$"),
    ("method.max_lr=-1.0", r"^method\.max_lr=-1\.0: must be a number > 0$"),
    ("method.memory_path=no/such/folder", r"^method\.memory_path='no/such/folder': no such file or directory$"),
    ("method.memory_path=.", r"^method\.memory_path='\.': not a Titan modules folder \(needs titan_memory\.json and "),
])
def test_config_errors_are_one_line_before_any_model_loads(override, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=message):
        load_config(["backbone=tiny_llama_random", "method=titan", "method.segment_length=8", override])


def test_titan_is_refused_on_a_backbone_without_llama_layers():
    with pytest.raises(ConfigError, match=r"^method=titan: backbone=tiny_gdn_random .*llama_layers"):
        load_config(["backbone=tiny_gdn_random", "method=titan"])
    assert load_config(["backbone=tiny_llama_random", "method=titan"]).method == TitanConfig()


def test_the_method_retrofits_and_loads_its_modules_once(tmp_path):
    from memexp.methods import build_method

    x = ids(3 * SEGMENT)
    trained, modules = titan()
    modules.save(tmp_path)
    method = build_method(TitanConfig(layers=3, segment_length=SEGMENT, test_batch=2 * SEGMENT,
                                      memory_path=str(tmp_path)))
    bb = tiny_llama()
    method.prepare(bb)
    memory = method.read(bb, x.tolist())
    torch.testing.assert_close(bb.forward(memory.state, [5]), trained.forward(trained.init_state(), [*x.tolist(), 5]))
    with pytest.raises(RuntimeError, match="already retrofitted"):
        method.prepare(bb)
