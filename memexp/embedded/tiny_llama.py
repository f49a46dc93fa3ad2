"""The tiny_llama_niah recipe: a small Llama-style Transformer trained from scratch on the NIAH
text the embedded GDN learns from (memexp.embedded.niah_text), the base model of the embedded
Titan-Llama demonstration (recipe=tiny_titan converts every layer of it).

It reuses tiny_gdn's curriculum (stage batches, answer-weighted loss, warmup + cosine, the
final RULER check): only the model differs. memexp's own Llama modules
(`memexp.backbones.attention`) are trained through `train_forward`, and the checkpoint is a
transformers-format Llama folder (config.json with model_type 'llama', model.safetensors, the
byte tokenizer) that `backbone.arch=llama backbone.pretrained=<folder>` reads back.
PyTorch's module defaults initialise it (embeddings N(0, 1)). A copy warm-up (`copy`) comes
first: from that init and with the NIAH curriculum alone at lr 3e-3 the model never retrieved
(0 % whole answers); a few hundred steps of copying random strings at lr 1e-3 give it an
induction circuit (docs/benchmarks.md). A copy string holds no needle, question or value.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Optional

import torch
import torch.nn.functional as F

from memexp.backbones.attention.model import AttentionBackbone, AttentionConfig, LlamaForCausalLM
from memexp.backbones.loading import save_weights
from memexp.backbones.tokenizer import ByteTokenizer
from memexp.core.schema import ASSETS_DIR, ConfigError
from memexp.embedded.niah_eval import plain_accuracy
from memexp.embedded.niah_text import TASK, stream
from memexp.embedded.tiny_gdn import Stage, check_stages, train_stage, write_recipe_record
from memexp.training.loop import Plan, Schedule, Step, train

ASSET = "tiny_llama_niah"  # memexp/assets/<it>: the model experiment=tiny_titan runs

COPY_CHARACTERS = "0123456789abcdefghijklmnopqrstuvwxyz"


@dataclass
class CopyWarmup:
    """Before the stages: BOS, a random string of COPY_CHARACTERS, a newline, the same string; the
    loss weights the second copy 1 and the rest `other_weight`; constant lr, AdamW."""

    steps: int = 0  # 0 = no warm-up
    batch_size: int = 16  # strings per step
    lr: float = 1e-3  # the warm-up's constant learning rate
    min_chars: int = 8  # string length, drawn per step
    max_chars: int = 48  # the longest string

    def check(self) -> None:
        if self.steps < 0 or self.batch_size < 1 or self.lr <= 0 or not 1 <= self.min_chars <= self.max_chars:
            raise ConfigError(f"recipe.copy: need steps >= 0, batch_size >= 1, lr > 0 and 1 <= min_chars <= "
                              f"max_chars (got {self.steps}, {self.batch_size}, {self.lr}, {self.min_chars}, "
                              f"{self.max_chars})")


@dataclass
class TinyLlamaRecipe:
    seed: int = 0  # model init and every training stream (RULER evaluates on seed 42 streams)
    output: Optional[str] = None  # checkpoint directory; null = a new outputs/train/tiny_llama_niah/<time>
    replace_assets: bool = False  # write the shipped model, memexp/assets/tiny_llama_niah (the tiny_titan preset's)
    model: dict = field(default_factory=lambda: {
        "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 512, "vocab_size": 258})  # transformers LlamaConfig fields
    init: str = "torch"  # torch: PyTorch's module defaults | normal: N(0, 0.02) matrices (memexp.random_init)
    answer_weight: float = 5.0  # loss weight of answer tokens (value, '.', EOS)
    other_weight: float = 0.1  # loss weight of every other token
    replay_suffix: str = " "  # text of tiny_gdn's replay-form batches (niah_text); unused with note_fraction 0
    copy: CopyWarmup = field(default_factory=CopyWarmup)
    stages: list[Stage] = field(default_factory=list)  # the NIAH curriculum after the warm-up, run in order
    threads: int = 2  # torch CPU threads
    log_every: int = 25  # steps between progress lines
    eval_length: int = 1024  # RULER target length of the final check
    eval_samples: int = 50  # RULER seed-42 examples in the final check; 0 = skip

    def __post_init__(self) -> None:
        check_stages(self.stages)
        self.copy.check()
        if self.init not in ("torch", "normal"):
            raise ConfigError(f"recipe.init={self.init!r}: allowed values are torch, normal")


def build_model(recipe: TinyLlamaRecipe) -> LlamaForCausalLM:
    conf = AttentionConfig.from_dict(recipe.model, strict=True, where="recipe.model")
    torch.manual_seed(recipe.seed)
    model = LlamaForCausalLM(conf)
    if recipe.init == "normal":
        model.init_weights(recipe.seed)
    return model


def copy_batch(recipe: TinyLlamaRecipe, step: int, tokenizer) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids [B, 2n + 2], loss weights [B, 2n + 1]) of copy step `step`: deterministic in (seed, step)."""
    c = recipe.copy
    n = stream(recipe.seed, "copy", step).randint(c.min_chars, c.max_chars)
    rows = []
    for i in range(c.batch_size):
        rng = stream(recipe.seed, "copy", step, i)
        text = "".join(rng.choice(COPY_CHARACTERS) for _ in range(n))
        rows.append([tokenizer.bos_id] + tokenizer.encode(text + "\n") + tokenizer.encode(text))
    ids = torch.tensor(rows)
    weights = torch.full((c.batch_size, ids.shape[1] - 1), recipe.other_weight)
    weights[:, -n:] = 1.0  # positions predicting the second copy
    return ids, weights


def train_copy(backbone: AttentionBackbone, recipe: TinyLlamaRecipe, tokenizer, log=print) -> dict:
    """The copy warm-up; returns its record (name, steps, tokens, seconds)."""
    c = recipe.copy
    model = backbone.model

    def batches():
        for step in range(c.steps):
            yield copy_batch(recipe, step, tokenizer)

    def loss(b):
        ids, weights = b
        logits = backbone.train_forward(ids[:, :-1])
        ce = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten(), reduction="none").view_as(weights)
        target = torch.zeros_like(weights, dtype=torch.bool)
        target[:, -((ids.shape[1] - 2) // 2):] = True  # the second copy (BOS, n chars, newline, n chars)
        copied = ((logits.argmax(-1) == ids[:, 1:]) & target).sum().item() / target.sum().item()
        return (ce * weights).sum() / weights.sum(), ids[:, :-1].numel(), {"copied": copied}

    t0, tokens, copied = time.perf_counter(), 0, []

    def progress(step: Step, opt) -> None:
        nonlocal tokens
        tokens += step.tokens
        copied.append(step.numbers["copied"])
        if step.index % recipe.log_every == 0 or step.index == c.steps:
            log(f"[copy] step {step.index}/{c.steps} loss {step.loss:.3f} copied {100 * sum(copied) / len(copied):.0f}% "
                f"({tokens / (time.perf_counter() - t0):.0f} tok/s, lr {c.lr:.1e})")
            copied.clear()

    model.train()
    train(Plan(list(model.parameters()), Schedule(peak=c.lr, total=c.steps, decay="constant"), batches(), loss,
               betas=(0.9, 0.98), on_step=progress))
    model.eval()
    return {"name": "copy", "steps": c.steps, "tokens": tokens, "seconds": round(time.perf_counter() - t0, 1)}


def save_llama(backbone: AttentionBackbone, directory: Path) -> None:
    """A transformers-format Llama folder: config.json, model.safetensors, tokenizer files."""
    directory.mkdir(parents=True, exist_ok=True)
    conf = {f.name: getattr(backbone.config, f.name) for f in fields(AttentionConfig) if f.name != "output_bias"}
    conf.update(model_type="llama", architectures=["LlamaForCausalLM"], bos_token_id=backbone.tokenizer.bos_id,
                eos_token_id=backbone.tokenizer.eos_id)
    (directory / "config.json").write_text(json.dumps(conf, indent=2) + "\n")
    save_weights(backbone.model, directory)
    backbone.tokenizer.save(directory)


def run(recipe: TinyLlamaRecipe, log=print) -> dict:
    """Train, save the checkpoint and recipe.json, and return what recipe.json records."""
    if not recipe.output and not recipe.replace_assets:
        raise ConfigError("recipe.output is null: name a folder (the CLI picks outputs/train/tiny_llama_niah/<time>), "
                          "or pass replace_assets=true to write memexp/assets/tiny_llama_niah")
    torch.set_num_threads(recipe.threads)
    out = ASSETS_DIR / ASSET if recipe.replace_assets else Path(recipe.output)
    tokenizer = ByteTokenizer()
    model = build_model(recipe)
    backbone = AttentionBackbone(model, tokenizer, "tiny_llama_niah", prefill_chunk=2048)
    t0 = time.perf_counter()
    stages = [train_copy(backbone, recipe, tokenizer, log)] if recipe.copy.steps else []
    for stage in recipe.stages:
        stages.append(train_stage(backbone, recipe, stage, tokenizer, log))
        save_llama(backbone, out)  # an interrupted run keeps its last finished stage
    train_seconds = time.perf_counter() - t0
    metrics = {}
    if recipe.eval_samples:
        key = f"plain_{TASK}_{recipe.eval_length}"
        metrics[key] = plain_accuracy(backbone, TASK, recipe.eval_length, recipe.eval_samples)
        log(f"plain {TASK} at {recipe.eval_length}: {metrics[key]:.1f}%")
    return write_recipe_record(out, recipe, stages, model, train_seconds, metrics, log)
