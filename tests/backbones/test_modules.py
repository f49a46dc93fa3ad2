"""The shared random initialisation: decay gates in the upstream ranges, the per-architecture
constants, and the same weights from the same seed whatever the global RNG holds."""

import pytest
import torch
import torch.nn.functional as F

from memexp.backbones import load_backbone

# (YAML, A range, where the decay-gate parameters live)
GATED = [("tiny_gdn_random", (0.0, 16.0)), ("tiny_gdn2_random", (1.0, 16.0)), ("tiny_mamba2_random", (1.0, 16.0)),
         ("tiny_qwen35_random", (0.01, 16.0))]


def params(bb, leaf):
    return [p for n, p in bb.model.named_parameters() if n.rpartition(".")[2] == leaf]


@pytest.mark.parametrize("name, a_range", GATED)
def test_decay_gates_lie_in_the_upstream_ranges(name, a_range):
    bb = load_backbone(name)
    A = torch.cat([p.exp() for p in params(bb, "A_log")])
    assert A.dtype == torch.float32 and a_range[0] <= A.min() and A.max() <= a_range[1]
    assert A.std() > 1  # drawn, not constant
    dt = F.softplus(torch.cat(params(bb, "dt_bias")))
    if name == "tiny_qwen35_random":
        assert torch.equal(torch.cat(params(bb, "dt_bias")), torch.ones_like(dt))  # transformers' constant
    else:
        assert 1e-3 - 1e-7 <= dt.min() and dt.max() <= 0.1 + 1e-7 and dt.std() > 0


def test_per_architecture_constants():
    mamba = load_backbone("tiny_mamba2_random")
    assert all(torch.equal(p, torch.ones_like(p)) for p in params(mamba, "D"))
    assert all(not b.any() for n, b in mamba.model.named_parameters() if n.endswith("conv1d.bias"))
    qwen = load_backbone("tiny_qwen35_random")
    for n, p in qwen.model.named_parameters():
        if n.endswith("linear_attn.norm.weight"):
            assert torch.equal(p, torch.ones_like(p)), n
        elif n.endswith("norm.weight"):  # zero-centred norms: scale 1 + 0
            assert not p.any(), n
    gdn2 = load_backbone("tiny_gdn2_random")
    assert all(torch.equal(p, torch.ones_like(p)) for n, p in gdn2.model.named_parameters()
               if n.endswith(("norm_1.weight", "norm_2.weight", "ln_f.weight")))


@pytest.mark.parametrize("name", [n for n, _ in GATED] + ["tiny_llama_random"])
def test_same_seed_same_weights_whatever_the_global_rng(name):
    torch.manual_seed(1)
    a = load_backbone(name).model.state_dict()
    torch.manual_seed(2)
    torch.rand(100)
    b = load_backbone(name).model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
