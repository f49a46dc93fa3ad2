"""`python -m memexp train recipe=titan_llama` on a tiny random Llama (2 layers, both converted) with
tiny local data: resume equals an uninterrupted run, the loss and schedule are the stated ones,
the authors' stage values, what is trained and logged, and the config errors."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from memexp.cli.train import load_recipe, main
from memexp.core.schema import ConfigError
from memexp.training.loop import lr_at
from memexp.training.loss import next_token_loss
from memexp.training.titan_llama.config import Stage
from memexp.training.titan_llama.train import schedule
from tests.training.titan_data import write_sources

TINY = ["backbone=tiny_llama_random", "backbone_fields={dtype: float32, device: cpu}",
        "method={layers: 2, segment_length: 16, test_batch: 32}", "sequence_length=128", "wandb=none", "threads=1",
        "shuffle_buffer=4"]
# two stages of 4 steps each: 4 x (2 sequences x 128 tokens) = 1,024 tokens per stage
STAGES = ("stages=[{name: pre, data: pretrain_mix, total_tokens: 1024, batch_size: 2, micro_batch_size: 1, "
          "lr: 1.0e-2, min_lr: 1.0e-3, warmup_start_lr: 1.0e-3, warmup_steps: 1, save_every: 1}, "
          "{name: sft, data: gold_sft, total_tokens: 1024, batch_size: 2, micro_batch_size: 2, lr: 1.0e-2, "
          "min_lr: 1.0e-3, warmup_start_lr: 1.0e-3, warmup_steps: 1, save_every: 3, longalign_examples: 3, "
          "loongrl_examples: 2}]")


def train(tmp_path, out, *extra) -> int:
    paths = write_sources(tmp_path / "data")
    return main(["recipe=titan_llama", f"output={out}", *TINY, STAGES, *(f"{k}={v}" for k, v in paths.items()),
                 *extra])


def tensors(out, stage):
    return load_file(str(out / stage / "modules" / "titan_memory.safetensors"))


def losses(out):
    return [(r["stage"], r["step"], r["loss"]) for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())]


def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path):
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert train(tmp_path, whole) == 0
    assert train(tmp_path, cut, "stop_after=3") == 0  # inside stage 1
    assert not (cut / "pre" / "modules").exists()
    assert train(tmp_path, cut, "stop_after=3") == 0  # finishes stage 1, then 2 steps into stage 2
    assert train(tmp_path, cut) == 0
    for stage in ("pre", "sft"):
        a, b = tensors(whole, stage), tensors(cut, stage)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), stage
    assert losses(whole) == losses(cut)  # every step logged once, with the same loss
    first = tensors(whole, "pre")
    init = {k: v for k, v in first.items() if k.endswith("memory.w1")}
    assert not all(torch.equal(v, torch.eye(v.shape[-1]).expand_as(v)) for v in init.values())  # W0 trained


def test_only_a_later_stage_needs_the_earlier_ones_folder(tmp_path):
    with pytest.raises(ConfigError, match="recipe.only=sft"):
        paths = write_sources(tmp_path / "data")
        recipe, run = load_recipe(["recipe=titan_llama", f"output={tmp_path / 'o'}", *TINY, STAGES, "only=sft",
                                   *(f"{k}={v}" for k, v in paths.items())])
        run(recipe, log=lambda line: None)


def test_only_the_titan_modules_train_and_the_logged_stats_cover_every_memory(tmp_path):
    out = tmp_path / "o"
    assert train(tmp_path, out, "only=pre", "log_every=1") == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    for layer in (0, 1):
        for name in ("theta", "eta", "alpha", "lambda", "inner_loss"):
            assert math.isfinite(rows[0][f"layer{layer}/{name}"]), (layer, name)
        # step 1 reads the initial gate, sigmoid(b) = 0.05, on the 112 of 128 positions after the first
        # 16-token segment (zero before it)
        assert rows[0][f"layer{layer}/lambda"] == pytest.approx(0.05 * 112 / 128, rel=1e-5)
    record = json.loads((out / "recipe.json").read_text())
    # trainable = per layer: W0 3 d^2 Hkv, theta/eta/alpha 3 (Hkv d + 1) Hkv, gate D x H d + H d; value mix
    # (layer 1 only) D Hkv + Hkv. Tiny: D 64, H 4, Hkv 2, d 16.
    D, H, Hk, d = 64, 4, 2, 16
    per_layer = 3 * d * d * Hk + 3 * (Hk * d + 1) * Hk + D * H * d + H * d
    assert record["trainable_parameters"] == 2 * per_layer + D * Hk + Hk
    ck = torch.load(out / "pre" / "checkpoint.pt", weights_only=False)
    assert all(k.startswith("layers.") for k in ck["modules"])  # only the Titan modules are saved
    moments = ck["optimizer"]["state"].values()  # AdamW holds moments for exactly the trained tensors
    assert sum(m["exp_avg"].numel() for m in moments) == record["trainable_parameters"]


def test_lr_schedule_is_linear_warmup_then_cosine():
    s = schedule(Stage(lr=1e-3, min_lr=1e-4, warmup_start_lr=1e-5, warmup_steps=4), 20)
    assert lr_at(s, 0) == pytest.approx(1e-5)
    assert lr_at(s, 2) == pytest.approx(1e-5 + 0.5 * (1e-3 - 1e-5))
    assert lr_at(s, 4) == pytest.approx(1e-3)
    assert lr_at(s, 12) == pytest.approx((1e-3 + 1e-4) / 2)  # half way through the cosine
    assert lr_at(s, 20) == pytest.approx(1e-4) and lr_at(s, 30) == pytest.approx(1e-4)


def test_next_token_loss_is_the_mean_over_supervised_targets():
    torch.manual_seed(0)
    B, T, V = 2, 1100, 7  # T crosses the 512-position pieces
    hidden, head = torch.randn(B, T, 5), torch.nn.Linear(5, V)
    with torch.no_grad():
        logits = head(hidden)
    labels = torch.randint(0, V, (B, T))
    labels[0, :600] = -100
    loss, acc = next_token_loss(hidden, head, labels)
    logp = F.log_softmax(logits, -1)
    terms, hits = [], 0
    for b in range(B):
        for t in range(T - 1):
            y = int(labels[b, t + 1])
            if y != -100:
                terms.append(-float(logp[b, t, y]))
                hits += int(logits[b, t].argmax()) == y
    assert loss.item() == pytest.approx(sum(terms) / len(terms), rel=1e-5)
    assert acc == pytest.approx(hits / len(terms))


def test_the_authors_stage_values():
    recipe, _ = load_recipe(["recipe=titan_llama"])
    steps = {s.name: s.steps(recipe.sequence_length) for s in recipe.stages}
    # configs/seg512_*: total_tokens // (batch_size x 16,384)
    assert steps == {"pretrain": 1_000_000_000 // (64 * 16384), "gold_sft": 200, "quality_sft": 59}
    assert steps["pretrain"] == 953
    assert (recipe.betas, recipe.weight_decay, recipe.grad_clip, recipe.sequence_length) == ([0.9, 0.95], 0.01, 10.0,
                                                                                             16384)
    by = {s.name: s for s in recipe.stages}
    assert (by["pretrain"].lr, by["pretrain"].min_lr, by["pretrain"].warmup_steps) == (5e-4, 1e-5, 10)
    assert (by["gold_sft"].longalign_examples, by["gold_sft"].loongrl_examples) == (9984, 2496)
    assert by["quality_sft"].quality_examples == 7569 and by["quality_sft"].save_every == 4
    assert recipe.method == {"layers": 4, "segment_length": 512, "test_batch": 1024}


@pytest.mark.parametrize("override, field", [
    ("stages.0.data=web", "recipe.stages.0.data"),
    ("stages.1.batch_size=3", "recipe.stages.1.batch_size"),
    ("only=finetune", "recipe.only"),
    ("wandb=maybe", "recipe.wandb"),
    ("stages.0.total_tokens=10", "recipe.stages.0.total_tokens"),
    ("fineweb.path=/nonexistent/fw.jsonl", "recipe.fineweb.path"),
])
def test_a_wrong_value_names_its_field(override, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        load_recipe(["recipe=titan_llama", override])
