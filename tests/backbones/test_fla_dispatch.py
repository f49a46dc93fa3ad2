"""GDN's and GDN-2's one call into FLA (memexp.kernels.fla), run on CPU against stand-ins for
FLA's kernels (kernel_stand_ins.py: FLA's argument names, FLA's naive references, and a
fused-recurrent kernel whose backward raises as FLA's does).

A call that needs a backward takes the chunk kernel at any length, for both rules and both
architectures, and its gradients are the reference path's; a call without gradients takes the
fused-recurrent kernel up to 64 tokens. Without the guard the backward fails: the stand-in would
catch a rule that lost it."""

from __future__ import annotations

import kernel_stand_ins
import pytest
import torch
import torch.nn.functional as F
from kernel_stand_ins import on_torch

from memexp.backbones import load_backbone
from memexp.kernels import fla
from memexp.kernels.gated_delta_rule import gated_delta_rule
from memexp.kernels.gdn2_rule import gdn2_rule

RULES = {"gated_delta_rule": gated_delta_rule, "gdn2": gdn2_rule}
CONFIGS = {"gdn": ("tiny_gdn_random", "gated_delta_rule"), "gdn2": ("tiny_gdn2_random", "gdn2")}


def rule_inputs(rule: str, T: int, seed: int = 0) -> list[torch.Tensor]:
    """q, k, v and the rule's gates for 1 sequence, 2 query/key heads (GDN: 4 value heads)."""
    gen = torch.Generator().manual_seed(seed)
    H, K, V = 2, 8, 4
    HV = 4 if rule == "gated_delta_rule" else H
    q, k = (F.normalize(torch.randn(1, T, H, K, generator=gen), dim=-1) for _ in range(2))
    v = torch.randn(1, T, HV, V, generator=gen)
    if rule == "gated_delta_rule":
        return [q, k, v, -torch.rand(1, T, HV, generator=gen), torch.rand(1, T, HV, generator=gen)]
    g = -torch.rand(1, T, H, K, generator=gen)
    return [q, k, v, g, torch.rand(1, T, H, K, generator=gen), torch.rand(1, T, H, V, generator=gen)]


def run_rule(rule: str, tensors: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    h0 = torch.randn(1, tensors[2].shape[2], tensors[0].shape[-1], tensors[2].shape[-1],
                     generator=torch.Generator().manual_seed(7))
    return RULES[rule](*tensors, initial_state=h0)


def grads_of(rule: str, tensors: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    leaves = [t.clone().requires_grad_(True) for t in tensors]
    o, state = run_rule(rule, leaves)
    (o.square().sum() + state.sum()).backward()
    return o.detach(), [t.grad for t in leaves]


@pytest.mark.parametrize("rule", list(RULES))
@pytest.mark.parametrize("T", [1, 20, 64])
def test_a_call_with_gradients_takes_the_chunk_kernel(rule, T, monkeypatch):
    """requires_grad inputs of at most 64 tokens (the fused-recurrent length): the chunk kernel
    runs, the backward goes through, and output and gradients equal the reference path's."""
    calls = kernel_stand_ins.install(monkeypatch, libraries=("fla",))
    tensors = rule_inputs(rule, T)
    out, grads = grads_of(rule, tensors)
    assert calls == [f"{rule}.chunk:{T}"]
    ref_out, ref_grads = on_torch(lambda: grads_of(rule, tensors))
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("rule", list(RULES))
def test_a_call_without_gradients_takes_fla_s_inference_switch(rule, monkeypatch):
    """No gradients: fused-recurrent up to 64 tokens, chunk above (FLA's layers' switch); the
    same inputs under torch.no_grad() when they require grad count as needing none."""
    calls = kernel_stand_ins.install(monkeypatch, libraries=("fla",))
    for T in (1, 64, 65):
        tensors = rule_inputs(rule, T, seed=T)
        out, state = run_rule(rule, tensors)
        ref_out, ref_state = on_torch(lambda t=tensors: run_rule(rule, t))
        torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(state, ref_state, atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        run_rule(rule, [t.requires_grad_(True) for t in rule_inputs(rule, 5)])
    assert calls == [f"{rule}.fused_recurrent:1", f"{rule}.fused_recurrent:64", f"{rule}.chunk:65",
                     f"{rule}.fused_recurrent:5"]


@pytest.mark.parametrize("arch", list(CONFIGS))
def test_training_either_architecture_on_fla_takes_the_chunk_kernel(arch, monkeypatch):
    """GDN and GDN-2 on FLA: `train_forward` over 12 tokens (short enough for the fused-recurrent
    kernel) runs the chunk kernel in every layer and every weight gets a finite gradient; the
    inference forward over the same tokens runs the fused-recurrent kernel."""
    config, rule = CONFIGS[arch]
    calls = kernel_stand_ins.install(monkeypatch, libraries=("fla",))
    backbone = load_backbone(config)
    ids = torch.randint(0, 258, (1, 12), generator=torch.Generator().manual_seed(0))
    backbone.train_forward(ids).float().square().mean().backward()
    layers = len(backbone.layers)
    assert calls == [f"{rule}.chunk:12"] * layers
    missing = [n for n, p in backbone.model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not missing, f"no finite gradient for {missing}"
    calls.clear()
    backbone.forward(backbone.init_state(), ids[0])
    assert calls == [f"{rule}.fused_recurrent:12"] * layers


@pytest.mark.parametrize("arch", list(CONFIGS))
def test_without_the_guard_training_would_hit_the_missing_backward(arch, monkeypatch):
    """The control: with the guard switched off, the same training step reaches the
    fused-recurrent kernel and its backward raises, so the tests above see the guard work."""
    config, rule = CONFIGS[arch]
    calls = kernel_stand_ins.install(monkeypatch, libraries=("fla",))
    monkeypatch.setattr(fla, "needs_backward", lambda *tensors: False)
    backbone = load_backbone(config)
    loss = backbone.train_forward(torch.arange(12)[None] + 40).float().square().mean()
    assert calls[0] == f"{rule}.fused_recurrent:12"
    with pytest.raises(NotImplementedError):
        loss.backward()


@pytest.mark.parametrize("major,triton_version,tilelang,refused", [
    (9, "3.6.0", False, True),  # the GPU image (H100, H200): FLA raises in chunk_bwd_dqkwg
    (9, "3.4.0", False, True),
    (9, "3.7.1", False, False),  # fixed in Triton
    (9, "3.3.1", False, False),
    (9, "3.6.0", True, False),  # tilelang serves that backward
    (8, "3.6.0", False, False),  # A100: not affected
])
def test_fla_refuses_the_gated_backward_only_on_hopper_with_an_affected_triton(major, triton_version, tilelang,
                                                                               refused):
    """FLA's condition (fla/ops/common/chunk_o.py: IS_NVIDIA_HOPPER, Triton >= 3.4.0 and < 3.7.1, no
    tilelang), found by scripts/check/gpu_preflight.py under the GPU image's Triton 3.6.0."""
    assert fla.fla_refuses_backward_on(major, triton_version, tilelang) is refused


def test_a_backward_fla_refuses_takes_the_reference_ops(monkeypatch):
    """With the refusal in force the rule never calls FLA, and its gradients are the reference's."""
    import memexp.kernels.gated_delta_rule as gdr

    def never(*args, **kwargs):
        raise AssertionError("FLA called for a backward it refuses")

    tensors = [t.requires_grad_() for t in rule_inputs("gated_delta_rule", 96)]
    want, _ = gated_delta_rule(*tensors)
    monkeypatch.setattr(gdr, "use_kernels", lambda *a, **k: True)
    monkeypatch.setattr(gdr, "fla_delta_rule", never)
    monkeypatch.setattr(gdr, "fla_refuses_backward", lambda rule, *t: True)
    got, _ = gated_delta_rule(*tensors)
    assert torch.equal(got, want)
