"""The update on one projection against a float64 computation from the weights, row slices of
fused projections against row layouts written out by hand, and the errors users see."""

import pytest
import torch

from memexp.adapters import AdapterError, LoRAConfig, attach_lora, load_adapters, save_adapters
from memexp.backbones import load_backbone
from memexp.core.schema import ConfigError

RANK, ALPHA = 4, 6.0  # scale 1.5


def _with_random_b(lora, seed=0):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for u in lora.updates:
            u.lora_B.copy_(torch.randn(u.lora_B.shape, generator=gen))
    return lora


def _on_off(module, lora, x):
    off = module(x)
    with lora.enabled():
        on = module(x)
    return on, off


def _manual_delta(x, lora, name):
    """x A^T B^T * alpha / rank in float64, from the tensors as saved."""
    t = lora.tensors()
    a, b = t[f"{name}.lora_A"].double(), t[f"{name}.lora_B"].double()
    return (x.double() @ a.T) @ b.T * (ALPHA / RANK)


def _x(n_in, seed=1):
    return torch.randn(3, 7, n_in, generator=torch.Generator().manual_seed(seed))


def test_whole_projection_update_equals_the_manual_low_rank_product():
    bb = load_backbone("tiny_llama_random")
    name = "model.layers.1.self_attn.v_proj"
    lora = _with_random_b(attach_lora(bb, LoRAConfig(targets=[name], rank=RANK, alpha=ALPHA)))
    module = bb.model.get_submodule(name)
    x = _x(module.in_features)
    on, off = _on_off(module, lora, x)
    assert torch.equal(off, x @ module.weight.T)
    torch.testing.assert_close((on - off).double(), _manual_delta(x, lora, name), atol=1e-5, rtol=1e-5)


def test_mamba2_xbc_rows_change_and_z_dt_rows_do_not():
    bb = load_backbone("tiny_mamba2_random")
    c = bb.model.config
    d_inner, gn = c.hidden_size * c.expand, c.n_groups * c.state_size  # in_proj rows: z | x | B | C | dt
    name = "backbone.layers.1.mixer.in_proj"
    lora = _with_random_b(attach_lora(bb, LoRAConfig(targets=["*.in_proj"], rows={"*.in_proj": ["x", "B", "C"]},
                                                     rank=RANK, alpha=ALPHA)))
    module = bb.model.get_submodule(name)
    x = _x(module.in_features)
    on, off = _on_off(module, lora, x)
    lo, hi = d_inner, 2 * d_inner + 2 * gn
    assert torch.equal(on[..., :lo], off[..., :lo]) and torch.equal(on[..., hi:], off[..., hi:])
    torch.testing.assert_close((on[..., lo:hi] - off[..., lo:hi]).double(), _manual_delta(x, lora, name),
                               atol=1e-5, rtol=1e-5)
    assert lora.spec()["modules"][name]["rows"] == [[lo, hi]]


def test_disjoint_row_ranges_write_their_own_rows_in_order():
    bb = load_backbone("tiny_mamba2_random")
    name = "backbone.layers.0.mixer.in_proj"
    module = bb.model.get_submodule(name)
    n = module.out_features
    lora = _with_random_b(attach_lora(bb, LoRAConfig(targets=[name], rows={name: [f"{n - 8}:{n}", "0:5"]},
                                                     rank=RANK, alpha=ALPHA)))
    x = _x(module.in_features)
    on, off = _on_off(module, lora, x)
    delta = _manual_delta(x, lora, name)  # its 13 rows: 0..4 first, then the last 8
    assert torch.equal(on[..., 5:n - 8], off[..., 5:n - 8])
    torch.testing.assert_close((on[..., :5] - off[..., :5]).double(), delta[..., :5], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close((on[..., n - 8:] - off[..., n - 8:]).double(), delta[..., 5:], atol=1e-5, rtol=1e-5)


def test_qwen35_k_rows_of_the_fused_qkv_projection():
    bb = load_backbone("tiny_qwen35_random")
    c = bb.model.config
    key_dim = c.linear_num_key_heads * c.linear_key_head_dim  # in_proj_qkv rows: q | k | v
    name = "model.layers.2.linear_attn.in_proj_qkv"
    lora = _with_random_b(attach_lora(bb, LoRAConfig(targets=[name], rows={name: ["k"]}, rank=RANK, alpha=ALPHA)))
    module = bb.model.get_submodule(name)
    x = _x(module.in_features)
    on, off = _on_off(module, lora, x)
    assert torch.equal(on[..., :key_dim], off[..., :key_dim])
    assert torch.equal(on[..., 2 * key_dim:], off[..., 2 * key_dim:])
    torch.testing.assert_close((on[..., key_dim:2 * key_dim] - off[..., key_dim:2 * key_dim]).double(),
                               _manual_delta(x, lora, name), atol=1e-5, rtol=1e-5)


def test_nested_blocks_and_an_exception_leave_the_model_bare():
    bb = load_backbone("tiny_gdn_random")
    lora = attach_lora(bb, LoRAConfig(targets=["*.q_proj"]))
    module = bb.model.get_submodule("model.layers.0.attn.q_proj")
    with lora.enabled():
        with lora.enabled():
            assert lora.is_enabled
        assert lora.is_enabled and len(module._forward_hooks) == 1
    with pytest.raises(RuntimeError), lora.enabled():
        raise RuntimeError("inside")
    assert not lora.is_enabled and not module._forward_hooks


def test_initialisation_is_seeded_and_b_starts_at_zero():
    def a_of(seed):
        return attach_lora(load_backbone("tiny_gdn_random"), LoRAConfig(targets=["*.q_proj"], seed=seed)).tensors()

    first, again, other = a_of(0), a_of(0), a_of(1)
    key = "model.layers.0.attn.q_proj.lora_A"
    assert torch.equal(first[key], again[key]) and not torch.equal(first[key], other[key])
    assert not torch.equal(first[key], first["model.layers.1.attn.q_proj.lora_A"])
    assert torch.count_nonzero(first["model.layers.0.attn.q_proj.lora_B"]) == 0
    assert first[key].abs().max() <= 1 / 8  # kaiming-uniform bound 1 / sqrt(in_features = 64)


def test_dropout_applies_in_train_mode_only():
    bb = load_backbone("tiny_gdn_random")
    name = "model.layers.0.attn.q_proj"
    lora = _with_random_b(attach_lora(bb, LoRAConfig(targets=[name], rank=RANK, alpha=ALPHA, dropout=0.5)))
    module = bb.model.get_submodule(name)
    x = _x(module.in_features)
    on, off = _on_off(module, lora.eval(), x)
    torch.testing.assert_close((on - off).double(), _manual_delta(x, lora, name), atol=1e-5, rtol=1e-5)
    on_train, _ = _on_off(module, lora.train(), x)
    assert not torch.allclose(on_train, on)


@pytest.mark.parametrize("config, match", [
    (LoRAConfig(targets=["model.layers.*.attn.q_prj"]), r"matches no nn.Linear .*closest .*q_proj"),
    (LoRAConfig(targets=["*.q_proj"], rows={"*.q_proj": ["x"]}), r"part names are none \(not a fused"),
    (LoRAConfig(targets=["*.q_proj"], rows={"*.k_proj": ["0:4"]}), r"matches none of the targets"),
    (LoRAConfig(targets=["*.q_proj"], rows={"*.q_proj": ["4:2"]}), r"not a non-empty range"),
    (LoRAConfig(targets=["*.q_proj"], rows={"*.q_proj": ["0:65"]}), r"within the projection's 64 rows"),
])
def test_wrong_targets_and_rows_give_one_line_errors(config, match):
    with pytest.raises(AdapterError, match=match) as e:
        attach_lora(load_backbone("tiny_gdn_random"), config)
    assert "\n" not in str(e.value)


def test_unknown_or_overlapping_parts_of_a_fused_projection():
    bb = load_backbone("tiny_mamba2_random")
    with pytest.raises(AdapterError, match=r"'xbc' .*part names are z, x, B, C, dt, xBC"):
        attach_lora(bb, LoRAConfig(targets=["*.in_proj"], rows={"*.in_proj": ["xbc"]}))
    with pytest.raises(AdapterError, match=r"overlaps"):
        attach_lora(bb, LoRAConfig(targets=["*.in_proj"], rows={"*.in_proj": ["x", "xBC"]}))


@pytest.mark.parametrize("field, value, match", [
    ("rank", 0, r"adapters.rank=0: must be a positive integer"),
    ("alpha", -1.0, r"adapters.alpha=-1.0: must be a positive number"),
    ("dropout", 1.0, r"adapters.dropout=1.0: must be in \[0, 1\)"),
    ("targets", [], r"adapters.targets=\[\]"),
])
def test_config_values_are_checked_before_touching_the_model(field, value, match):
    config = LoRAConfig(targets=["*.q_proj"])
    setattr(config, field, value)
    with pytest.raises(ConfigError, match=match):
        config.check()


def test_loading_onto_other_shapes_or_modules_is_one_clear_error(tmp_path):
    src = load_backbone("tiny_gdn_random")
    save_adapters(attach_lora(src, LoRAConfig(targets=["*.q_proj"])), tmp_path / "a")
    narrow = load_backbone({"name": "n", "arch": "gdn", "tokenizer": "byte", "seed": 0,
                            "model": {"hidden_size": 32, "num_hidden_layers": 2, "num_heads": 2, "head_dim": 16,
                                      "vocab_size": 258}})
    with pytest.raises(AdapterError, match=r"do not fit GDNForCausalLM: model.layers.0.attn.q_proj: saved for a "
                                           r"64 -> 64 projection, this model's is 32 -> 32") as e:
        load_adapters(narrow, tmp_path / "a")
    assert "\n" not in str(e.value)
    with pytest.raises(AdapterError, match=r"do not fit Mamba2ForCausalLM: .*matches no nn.Linear"):
        load_adapters(load_backbone("tiny_mamba2_random"), tmp_path / "a")
    with pytest.raises(AdapterError, match=r"not an adapter folder"):
        load_adapters(src, tmp_path / "missing")
