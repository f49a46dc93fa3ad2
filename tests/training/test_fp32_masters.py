"""Trainable weights on a bf16 backbone keep fp32 master copies: LoRA adapters (what the
notebank_lora recipe trains) and the Titan modules (what the titan_llama recipe trains).

bf16 keeps 8 significant bits, so a stored weight w moves only by steps of at least 2^-8 |w|
(half its spacing, 2^-7 |w|, rounds to the nearer neighbour). One AdamW step moves every weight
with a non-zero gradient by lr (its first update is lr * g / (|g| + eps), bias corrections
included). With lr = 1e-4 * median |w| the step is ~40x below what a bf16 weight can take: stored
in bf16 it would round back to the old value for nearly every weight. The fp32 master must move
by exactly lr (to fp32 rounding). The two recipes are then run for one or two updates on a bf16
backbone with such a learning rate: what they save has kept the step.
"""

from __future__ import annotations

import torch

from memexp.adapters import attach_lora, freeze_base
from memexp.adapters.lora import LoRAConfig
from memexp.backbones import load_backbone
from memexp.methods.titan.config import TitanConfig
from memexp.methods.titan.retrofit import retrofit

RELATIVE_STEP = 1e-4  # the update over the median weight: far below bf16's 2^-8 (3.9e-3)


def tiny(arch: str, **fields):
    return load_backbone({"name": f"tiny_{arch}_bf16", "arch": arch, "tokenizer": "byte", "dtype": "bfloat16",
                          "device": "cpu", "model": {"hidden_size": 64, "num_hidden_layers": 2,
                                                     "vocab_size": 258, **fields}})


def ids(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 256, (2, n), generator=torch.Generator().manual_seed(seed))


def check_one_small_step(params: list[torch.nn.Parameter], loss_of) -> None:
    """One AdamW step of lr = RELATIVE_STEP * median |w| moves each master by lr where its
    gradient is non-zero, a move bf16 storage would lose for most weights."""
    assert params and all(p.dtype == torch.float32 for p in params), {p.dtype for p in params}
    lr = RELATIVE_STEP * torch.cat([p.detach().abs().flatten() for p in params]).median().item()
    assert lr > 0
    before = [p.detach().clone() for p in params]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0, eps=1e-30)
    loss_of().backward()
    grads = [p.grad.clone() for p in params]
    assert all(g.dtype == torch.float32 for g in grads), "gradients reach the masters in fp32"
    opt.step()
    moved, lost_in_bf16, total = 0, 0, 0
    for p, w0, g in zip(params, before, grads):
        live = g != 0
        # w0 - w1 is exact (Sterbenz); w1 itself is w0 - lr rounded to fp32 (half a spacing, 2^-24 |w|),
        # and Adam's lr * m / sqrt(v) carries a few fp32 roundings of lr
        error = ((w0 - p.detach()) - lr * g.sign())[live].abs()
        assert (error <= 2 ** -24 * w0[live].abs() + 1e-5 * lr).all(), f"largest error {error.max():.3g} at lr {lr:.3g}"
        assert torch.equal(p.detach()[~live], w0[~live])
        moved += int(live.sum())
        # the same step applied to a bf16 copy of the weight: what a bf16 parameter would keep
        w16 = w0[live].bfloat16()
        lost_in_bf16 += int(((w16.float() - lr * g[live].sign()).bfloat16() == w16).sum())
        total += w0.numel()
    assert moved > total / 2, f"only {moved} of {total} trainable weights had a gradient"
    assert lost_in_bf16 > moved / 2, "the step should be below bf16's resolution for most weights"


def test_lora_masters_are_fp32_on_a_bf16_backbone_and_keep_a_sub_resolution_step():
    bb = tiny("gdn", num_heads=2, head_dim=32)
    freeze_base(bb)
    base = {n: p.detach().clone() for n, p in bb.model.named_parameters()}
    lora = attach_lora(bb, LoRAConfig(targets=["model.layers.*.attn.q_proj", "model.layers.*.attn.v_proj"],
                                      rank=4, alpha=8))
    with torch.no_grad():  # B starts at zero (no gradient for A); a trained-looking B gives both one
        for p in lora.trainable_parameters():
            if p.abs().max() == 0:
                p.copy_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(3)))
    x = ids(20)

    def loss():
        with lora.enabled():
            logits = bb.train_forward(x)
        assert logits.dtype == torch.bfloat16, "the backbone computes in bf16 with the adapters on"
        return logits.float().square().mean()

    check_one_small_step(lora.trainable_parameters(), loss)
    assert all(torch.equal(p, base[n]) for n, p in bb.model.named_parameters()), "the frozen base moved"
    assert all(t.dtype == torch.float32 for t in lora.tensors().values()), "saved adapters are the fp32 masters"


def test_titan_masters_are_fp32_on_a_bf16_backbone_and_keep_a_sub_resolution_step():
    bb = tiny("llama", num_attention_heads=4, num_key_value_heads=2, intermediate_size=128)
    modules = retrofit(bb, TitanConfig(layers=2, segment_length=4, test_batch=8))
    with torch.no_grad():  # the gates start closed-ish and zero-weighted: open them so every module has a gradient
        for name, p in modules.named_parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=torch.Generator().manual_seed(len(name))))
    x = ids(20)

    def loss():
        logits = bb.train_forward(x)
        assert logits.dtype == torch.bfloat16
        return logits.float().square().mean()

    check_one_small_step([p for p in modules.parameters() if p.requires_grad], loss)


def test_the_notebank_lora_recipe_trains_and_saves_the_fp32_masters_on_a_bf16_backbone(tmp_path):
    """Two updates of the recipe on tiny_gdn in bf16 at lr 1e-5: the first moves only B (A has no
    gradient while B = 0), the second moves A by at most lr (Adam), ~1e-4 of A's typical
    1 / sqrt(128), which bf16 storage would round away; the saved A must have moved."""
    from test_notebank_lora_recipe import adapter_tensors, run
    from test_notebank_lora_recipe import tiny as tiny_recipe

    from memexp.cli.train import run_config

    lr = 1e-5
    common = ("data.examples=2", "accumulate=1", f"lr={lr}", "weight_decay=0.0", "overrides=[backbone.dtype=bfloat16]")
    runs = {steps: tiny_recipe(tmp_path, f"steps{steps}", f"steps={steps}", *common) for steps in (1, 2)}
    assert run_config(runs[2]).backbone.dtype == "bfloat16"
    for recipe in runs.values():
        run(recipe, log=lambda line: None)
    one, two = adapter_tensors(tmp_path / "steps1"), adapter_tensors(tmp_path / "steps2")
    assert all(t.dtype == torch.float32 for t in [*one.values(), *two.values()])
    a_names = [k for k in one if k.endswith("lora_A")]
    a1 = torch.cat([one[k].flatten() for k in a_names])
    a2 = torch.cat([two[k].flatten() for k in a_names])
    step = (a2 - a1).abs()
    assert (step > 0).float().mean() > 0.5, "the second update should move most of A"
    assert (step <= lr * (1 + 1e-3) + 2 ** -24 * a1.abs()).all()
    kept_by_bf16 = (a2.bfloat16() != a1.bfloat16()).float().mean()
    assert kept_by_bf16 < 0.1, f"{kept_by_bf16:.0%} of the steps would survive bf16 storage: lr is not small enough"


def test_the_titan_llama_recipe_trains_and_saves_the_fp32_masters_on_a_bf16_backbone(tmp_path):
    """One update of the recipe on a tiny random Llama in bf16 at lr 1e-6: W0 starts at I and 4 I, where
    bf16's spacing is 2^-7 and 2^-5, so a bf16 W0 would keep its diagonal; the saved fp32 masters moved
    it by at most lr (Adam's first step), and the optimiser holds fp32 moments."""
    from safetensors.torch import load_file
    from test_titan_recipe import TINY

    from memexp.cli.train import main
    from tests.training.titan_data import write_sources

    lr = 1e-6
    stage = (f"stages=[{{name: pre, data: pretrain_mix, total_tokens: 256, batch_size: 2, micro_batch_size: 1, "
             f"lr: {lr}, min_lr: {lr}, warmup_start_lr: {lr}, warmup_steps: 0, save_every: 1}}]")
    tiny = [a.replace("dtype: float32", "dtype: bfloat16") for a in TINY]
    assert tiny != TINY
    paths = write_sources(tmp_path / "data")
    out = tmp_path / "o"
    assert main(["recipe=titan_llama", f"output={out}", *tiny, stage, "only=pre",
                 *(f"{k}={v}" for k, v in paths.items())]) == 0
    saved = load_file(str(out / "pre" / "modules" / "titan_memory.safetensors"))
    assert all(t.dtype == torch.float32 for t in saved.values())
    for name, t in saved.items():
        if name.endswith(("memory.w1", "memory.w3")):
            init = (4.0 if name.endswith("w3") else 1.0)
            diagonal = t.diagonal(dim1=-2, dim2=-1)
            step = (diagonal - init).abs()
            assert (step > 0).float().mean() > 0.5 and (step <= lr * (1 + 1e-3) + 2 ** -24 * init).all(), name
            assert torch.equal(diagonal.bfloat16().float(), torch.full_like(diagonal, init)), "below bf16's spacing"
    moments = torch.load(out / "pre" / "checkpoint.pt", weights_only=False)["optimizer"]["state"].values()
    assert moments and all(m["exp_avg"].dtype == torch.float32 for m in moments)
