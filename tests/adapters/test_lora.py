"""LoRA adapters on every architecture: off is the bare model bit for bit, on adds exactly
x A^T B^T * alpha / rank to the chosen projections (and rows), files round-trip exactly, and
gradients reach the adapters only."""

import pytest
import torch

from memexp.adapters import (
    Adapters,
    LoRAConfig,
    attach_lora,
    content_hash,
    file_hash,
    freeze_base,
    load_adapters,
    save_adapters,
)
from memexp.backbones import load_backbone as load

# per architecture: targets that cover its attention/recurrent mixers and MLPs, row slices of
# fused projections where it has them
ARCH_TARGETS = {
    "tiny_gdn_random": LoRAConfig(targets=["model.layers.*.attn.q_proj", "*.mlp.down_proj"]),
    "tiny_mamba2_random": LoRAConfig(targets=["backbone.layers.*.mixer.in_proj", "*.out_proj"],
                                     rows={"*.in_proj": ["x", "B", "C"]}),
    "tiny_llama_random": LoRAConfig(targets=["model.layers.*.self_attn.q_proj", "*.v_proj"]),
    "tiny_qwen35_random": LoRAConfig(targets=["*.linear_attn.in_proj_qkv", "*.self_attn.q_proj"],
                                     rows={"*.in_proj_qkv": ["k"]}),
    "tiny_gdn2_random": LoRAConfig(targets=["transformer.h.*.attn.q_proj", "*.swiglu.up_proj"]),
}
ARCHS = list(ARCH_TARGETS)
IDS = [(7 * i + 3) % 250 for i in range(70)]  # longer than the tiny configs' conv windows and chunks


def _randomise_b(lora, seed=0):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for u in lora.updates:
            u.lora_B.copy_(torch.randn(u.lora_B.shape, generator=gen) * 0.5)


def _logits(bb):
    return bb.forward(bb.init_state(), IDS)


@pytest.fixture(params=ARCHS)
def arch(request):
    return request.param


def test_off_is_bit_identical_and_leaves_no_hook(arch):
    bb = load(arch)
    bare = _logits(bb)
    lora = attach_lora(bb, ARCH_TARGETS[arch])
    _randomise_b(lora)
    assert torch.equal(_logits(bb), bare)
    with lora.enabled():
        assert not torch.equal(_logits(bb), bare)  # the hooks really sit on this arch's forward path
    assert torch.equal(_logits(bb), bare)
    assert all(not m._forward_hooks for m in bb.model.modules())


def test_on_with_fresh_adapters_changes_nothing(arch):
    bb = load(arch)
    bare = _logits(bb)
    lora = attach_lora(bb, ARCH_TARGETS[arch])
    assert all(torch.count_nonzero(u.lora_B) == 0 for u in lora.updates)
    with lora.enabled():
        assert torch.equal(_logits(bb), bare)


def test_state_dict_keys_and_base_weights_unchanged(arch):
    bb = load(arch)
    before = {k: v.clone() for k, v in bb.model.state_dict().items()}
    lora = attach_lora(bb, ARCH_TARGETS[arch])
    _randomise_b(lora)
    with lora.enabled():
        _logits(bb)
        assert list(bb.model.state_dict()) == list(before)
    after = bb.model.state_dict()
    assert list(after) == list(before)
    assert all(torch.equal(after[k], before[k]) for k in before)


def test_save_then_load_into_a_fresh_model_reproduces_logits(arch, tmp_path):
    bb = load(arch)
    lora = attach_lora(bb, ARCH_TARGETS[arch])
    _randomise_b(lora)
    digest = save_adapters(lora, tmp_path / "lora")
    with lora.enabled():
        expected = _logits(bb)
    fresh = load(arch)
    loaded = load_adapters(fresh, tmp_path / "lora")
    assert isinstance(loaded, Adapters)
    with loaded.enabled():
        assert torch.equal(_logits(fresh), expected)
    assert digest == content_hash(lora) == content_hash(loaded) == file_hash(tmp_path / "lora")
    _randomise_b(loaded, seed=1)
    assert content_hash(loaded) != digest


def test_gradients_reach_only_the_adapters(arch):
    bb = load(arch)
    lora = attach_lora(bb, ARCH_TARGETS[arch])
    _randomise_b(lora)  # with B = 0 the gradient of A would be zero
    freeze_base(bb)
    name = lora.names[0]
    module = bb.model.get_submodule(name)
    x = torch.randn(2, 5, module.in_features, generator=torch.Generator().manual_seed(0))
    with torch.enable_grad(), lora.enabled():
        module(x).square().sum().backward()
    u = lora.updates[0]
    assert u.lora_A.grad is not None and u.lora_A.grad.abs().sum() > 0
    assert u.lora_B.grad is not None and u.lora_B.grad.abs().sum() > 0
    assert all(p.grad is None and not p.requires_grad for p in bb.model.parameters())
    assert {id(p) for p in lora.trainable_parameters()} == {id(t) for u in lora.updates for t in (u.lora_A, u.lora_B)}


@pytest.mark.parametrize("name", ARCHS)
def test_training_forward_trains_every_adapter_and_no_base_weight(name):
    bb = load(name)
    lora = attach_lora(bb, ARCH_TARGETS[name])
    _randomise_b(lora)
    freeze_base(bb)
    ids = torch.tensor([IDS[:40], IDS[30:]])
    with torch.enable_grad(), lora.enabled():
        bb.train_forward(ids).logsumexp(-1).mean().backward()
    for name, p in lora.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    assert all(p.grad is None for p in bb.model.parameters())
