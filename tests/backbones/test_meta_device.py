"""A model built on the meta device (a checkpoint's load, the cost model's projection count) has
the shapes and dtypes of one built normally, and its build pulls in neither torch._dynamo nor sympy:
torch's meta implementations of normal_ and empty_like import them, about 1.5 CPU-s in every
process that loads a checkpoint (torch 2.13)."""

import json

import torch
from helpers.memexp_process import python
from torch import nn

from memexp.backbones.meta_device import on_meta_device


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(11, 6)
        self.proj = nn.Linear(6, 5)
        self.norm = nn.LayerNorm(5)
        self.gate = nn.Parameter(torch.empty(3).uniform_(1, 16).log())


def test_the_meta_build_has_the_normal_builds_parameters_and_leaves_init_working_after():
    with on_meta_device():
        meta = Small()
    normal = Small()
    assert {n: (p.shape, p.dtype, p.device.type) for n, p in meta.named_parameters()} == \
           {n: (p.shape, p.dtype, "meta") for n, p in normal.named_parameters()}
    with on_meta_device():
        on_cpu = torch.empty(4, device="cpu").fill_(3.0)  # placed on a real device on purpose
    assert on_cpu.eq(3.0).all()
    # outside the context, initialisers fill again
    assert normal.embed.weight.std() > 0.5 and normal.norm.weight.eq(1).all()
    assert normal.gate.min() >= 0 and normal.gate.max() <= torch.tensor(16.0).log()


def test_loading_a_checkpoint_and_counting_projections_import_neither_dynamo_nor_sympy():
    code = ("import json, sys\n"
            "from memexp.backbones import load_backbone\n"
            "from memexp.backbones.shapes import shapes_for\n"
            "from memexp.core.compose import load_config\n"
            "flops = {}\n"
            "for name in ('tiny_llama_random', 'tiny_mamba2_random', 'tiny_qwen35_random'):\n"
            "    flops[name] = shapes_for(load_config([f'backbone={name}', 'method=plain']).backbone).flops_token\n"
            "backbone = load_backbone(load_config(['backbone=tiny_gdn_words']).backbone)\n"
            "print(json.dumps({'flops': all(f > 0 for f in flops.values()), 'loaded': backbone.model.training is False,\n"
            "                  'dynamo': 'torch._dynamo' in sys.modules, 'sympy': 'sympy' in sys.modules}))\n")
    out = python("-c", code)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"flops": True, "loaded": True, "dynamo": False,
                                                                "sympy": False}
