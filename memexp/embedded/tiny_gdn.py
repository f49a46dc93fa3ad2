"""The tiny_gdn recipe: a small Gated DeltaNet trained from scratch on RULER-style NIAH text.

It uses memexp's own GDN (`GDNBackbone.train_forward`: the same layers and reference ops
the backbone runs) and saves an FLA-format checkpoint with its byte-level tokenizer,
read back by `backbone=tiny_gdn` like any other GDN checkpoint.

What makes a model this small learn the task on two CPU cores in minutes:
- PyTorch's default initialisation (embeddings N(0, 1)): with FLA's std-0.02 init, 950
  steps (~9 minutes) of this curriculum left the number's digits near chance; with this
  init the first stage copies it after 400 steps (~2.5 minutes);
- a long-memory gate at init (A = 1, decay 1e-4..1e-3 per token): with FLA's init the
  learned decay kept only tens of tokens, too few to carry a number across the question;
- the loss weighs answer tokens far above the rest (the haystack is noise);
- a curriculum over the question: first a short question right after the needle, then
  longer haystacks, then RULER's full question (which puts ~150 bytes between the needle
  and the answer).
A share of each stage's batches is the text NoteBank replays after a state reset (needle,
replay suffix, question), so the model reads replayed notes like the original context.
"""

from __future__ import annotations

import json
import math
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

import torch
import torch.nn.functional as F

from memexp.backbones.gdn.model import GDNBackbone, GDNConfig, GDNForCausalLM
from memexp.backbones.tokenizer import ByteTokenizer
from memexp.core.schema import ASSETS_DIR, ConfigError, portable_assets
from memexp.embedded.niah_eval import plain_accuracy
from memexp.embedded.niah_text import QUESTIONS, STREAM_PREFIX, TASK, NiahText, niah_text, stream
from memexp.training.loop import Plan, Schedule, Step, train

CHECKPOINT_DIR = ASSETS_DIR / "tiny_gdn"


@dataclass
class Stage:
    """One curriculum stage; every batch holds examples with the same haystack size."""

    name: str = "stage"  # the stage's name in the log and recipe.json
    steps: int = 100  # optimizer steps
    batch_size: int = 16  # sequences per step
    lr: float = 3e-3  # peak learning rate: 10-step warmup, then cosine to 10 % of it
    question: str = "ruler"  # ruler | short (see memexp.embedded.niah_text)
    min_lines: int = 1  # noise lines in the haystack, drawn uniformly per batch
    max_lines: int = 6  # the most noise lines in the haystack
    note_fraction: float = 0.25  # share of batches in NoteBank's replay form (needle, suffix, question)


def check_stages(stages: list[Stage]) -> None:
    """A NIAH-text curriculum's stages (tiny_gdn's and tiny_llama_niah's), before any step runs."""
    if not stages:
        raise ConfigError("recipe.stages is empty: give at least one stage")
    for i, s in enumerate(stages):
        where = f"recipe.stages.{i}"
        if s.question not in QUESTIONS:
            raise ConfigError(f"{where}.question={s.question!r}: allowed values are {', '.join(QUESTIONS)}")
        if not 1 <= s.min_lines <= s.max_lines:
            raise ConfigError(f"{where}: need 1 <= min_lines <= max_lines, got {s.min_lines}, {s.max_lines}")
        if not 0.0 <= s.note_fraction <= 1.0:
            raise ConfigError(f"{where}.note_fraction={s.note_fraction!r}: must be in [0, 1]")
        if s.steps < 0 or s.batch_size < 1 or s.lr <= 0:
            raise ConfigError(f"{where}: steps >= 0, batch_size >= 1 and lr > 0 are required")


@dataclass
class TinyGDNRecipe:
    seed: int = 0  # model init and every training stream (RULER evaluates on seed 42 streams)
    output: Optional[str] = None  # checkpoint directory; null = a new outputs/train/tiny_gdn/<time> (memexp.cli.train)
    replace_assets: bool = False  # write the shipped model, memexp/assets/tiny_gdn (what backbone=tiny_gdn runs)
    init_from: Optional[str] = None  # start from this checkpoint instead of random init (stage experiments)
    model: dict = field(default_factory=lambda: {
        "hidden_size": 128, "num_hidden_layers": 2, "num_heads": 2, "head_dim": 64, "expand_v": 1.0,
        "hidden_ratio": 4, "vocab_size": 258})  # FLA GatedDeltaNetConfig fields
    init: str = "torch"  # torch: PyTorch's module defaults (embeddings N(0, 1)) | fla: FLA's std-0.02 init
    decay_min: float = 1e-4  # initial per-token forgetting 1 - exp(g), log-uniform over heads
    decay_max: float = 1e-3  # the largest initial per-token forgetting (see decay_min)
    conv_init: float = 0.5  # short-conv taps ~ U(-conv_init, conv_init) (PyTorch's Conv1d default for 4 taps)
    answer_weight: float = 5.0  # loss weight of answer tokens (value, '.', EOS)
    other_weight: float = 0.1  # loss weight of every other token
    replay_suffix: str = " "  # text between a replayed note and the question (NoteBankConfig.replay_suffix)
    stages: list[Stage] = field(default_factory=list)  # the curriculum, run in order
    threads: int = 2  # torch CPU threads
    log_every: int = 25  # steps between progress lines
    eval_length: int = 1024  # RULER target length of the final check (the training length)
    eval_samples: int = 50  # RULER seed-42 examples in the final check; 0 = skip

    def __post_init__(self) -> None:
        check_stages(self.stages)
        if self.init not in ("torch", "fla"):
            raise ConfigError(f"recipe.init={self.init!r}: allowed values are torch, fla")
        if self.conv_init <= 0:
            raise ConfigError(f"recipe.conv_init={self.conv_init!r}: must be > 0")
        if not 0 < self.decay_min <= self.decay_max < 1:
            raise ConfigError("recipe.decay_min/decay_max: need 0 < decay_min <= decay_max < 1")


def build_model(recipe: TinyGDNRecipe) -> GDNForCausalLM:
    conf = GDNConfig.from_dict(recipe.model, strict=True, where="recipe.model")
    torch.manual_seed(recipe.seed)
    model = GDNForCausalLM(conf)
    if recipe.init == "fla":
        model.init_weights(recipe.seed)
    long_memory_gates(model, recipe.decay_min, recipe.decay_max, recipe.seed)
    gen = torch.Generator().manual_seed(recipe.seed + 2)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("conv1d.weight"):
                p.uniform_(-recipe.conv_init, recipe.conv_init, generator=gen)
    return model


@torch.no_grad()
def long_memory_gates(model: GDNForCausalLM, decay_min: float, decay_max: float, seed: int) -> None:
    """A = 1 and softplus(dt_bias) log-uniform in [decay_min, decay_max]: at a = 0 the state
    keeps exp(-dt) of itself per token, i.e. it remembers ~1/dt tokens."""
    gen = torch.Generator().manual_seed(seed + 1)
    for layer in model.model.layers:
        attn = layer.attn
        attn.A_log.zero_()
        u = torch.rand(attn.dt_bias.shape, generator=gen)
        dt = torch.exp(math.log(decay_min) + u * (math.log(decay_max) - math.log(decay_min)))
        attn.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))


def batch(texts: list[NiahText], pad_id: int, answer_weight: float, other_weight: float):
    """(inputs [B, T], targets [B, T], loss weights [B, T], answer mask [B, T]), right-padded."""
    T = max(len(t.ids) for t in texts) - 1
    inputs = torch.full((len(texts), T), pad_id, dtype=torch.long)
    targets = torch.full((len(texts), T), pad_id, dtype=torch.long)
    answer = torch.zeros(len(texts), T, dtype=torch.bool)
    valid = torch.zeros(len(texts), T, dtype=torch.bool)
    for b, t in enumerate(texts):
        n = len(t.ids) - 1
        inputs[b, :n] = torch.tensor(t.ids[:-1])
        targets[b, :n] = torch.tensor(t.ids[1:])
        valid[b, :n] = True
        answer[b, t.answer_start - 1:n] = True  # position i predicts ids[i + 1]
    weights = torch.where(answer, answer_weight, other_weight) * valid
    return inputs, targets, weights, answer


def stage_texts(recipe: TinyGDNRecipe, stage: Stage, step: int, tokenizer) -> list[NiahText]:
    """The batch of one step: deterministic in (seed, stage name, step)."""
    rng = stream(recipe.seed, stage.name, step)
    note = rng.random() < stage.note_fraction
    lines = rng.randint(stage.min_lines, stage.max_lines)
    return [niah_text(tokenizer, stream(recipe.seed, stage.name, step, i), lines, stage.question, note,
                      recipe.replay_suffix) for i in range(stage.batch_size)]


def schedule(stage: Stage) -> Schedule:
    """10-step warm-up (or the whole stage when shorter), then cosine to 10 % of the peak."""
    return Schedule(peak=stage.lr, total=stage.steps, warmup=min(10, stage.steps), floor=0.1 * stage.lr)


def train_stage(backbone: GDNBackbone, recipe: TinyGDNRecipe, stage: Stage, tokenizer, log=print) -> dict:
    model = backbone.model

    def batches():
        for step in range(stage.steps):
            yield batch(stage_texts(recipe, stage, step, tokenizer), tokenizer.eos_id, recipe.answer_weight,
                        recipe.other_weight)

    def loss(b):
        inputs, targets, weights, answer = b
        logits = backbone.train_forward(inputs)
        ce = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none").view_as(weights)
        hit = logits.argmax(-1) == targets
        return (ce * weights).sum() / weights.sum(), inputs.numel(), {
            "answers": (hit | ~answer).all(-1).float().mean().item(),
            "answer_tokens": (hit & answer).sum().item() / answer.sum().item()}

    model.train()
    t0 = time.perf_counter()
    progress = Progress(stage, recipe.log_every, log)
    train(Plan(list(model.parameters()), schedule(stage), batches(), loss, betas=(0.9, 0.98), on_step=progress))
    model.eval()
    return {"name": stage.name, "steps": stage.steps, "tokens": progress.tokens,
            "seconds": round(time.perf_counter() - t0, 1)}


class Progress:
    """A NIAH-text stage's progress lines every `every` updates (and at its last): the window's
    mean loss, whole-answer and answer-token rates, tokens/s and lr."""

    def __init__(self, stage, every: int, log) -> None:
        self.stage, self.every, self.log = stage, every, log
        self.t0, self.tokens, self.window = time.perf_counter(), 0, []

    def __call__(self, step: Step, opt) -> None:
        self.tokens += step.tokens
        self.window.append(step)
        if step.index % self.every == 0 or step.index == self.stage.steps:
            n, w = len(self.window), self.window
            self.log(f"[{self.stage.name}] step {step.index}/{self.stage.steps} loss {sum(s.loss for s in w) / n:.3f} "
                     f"answers {100 * sum(s.numbers['answers'] for s in w) / n:.0f}% "
                     f"(tokens {100 * sum(s.numbers['answer_tokens'] for s in w) / n:.0f}%) "
                     f"({self.tokens / (time.perf_counter() - self.t0):.0f} tok/s, lr {step.lr:.1e})")
            self.window = []


def run(recipe: TinyGDNRecipe, log=print) -> dict:
    """Train, save the checkpoint and recipe.json, and return what recipe.json records."""
    torch.set_num_threads(recipe.threads)
    torch.manual_seed(recipe.seed)
    tokenizer = ByteTokenizer()
    if not recipe.replace_assets and not recipe.output:
        raise ConfigError("recipe.output is null: name a folder (the CLI picks outputs/train/tiny_gdn/<time>), "
                          "or pass replace_assets=true to write memexp/assets/tiny_gdn")
    out = CHECKPOINT_DIR if recipe.replace_assets else Path(recipe.output)
    if recipe.init_from:
        from memexp.backbones import load_backbone

        model = load_backbone({"name": "tiny_gdn", "arch": "gdn", "pretrained": str(Path(recipe.init_from).resolve()),
                               "device": "cpu", "dtype": "float32"}).model
    else:
        model = build_model(recipe)
    t0 = time.perf_counter()
    backbone = GDNBackbone(model, tokenizer, "tiny_gdn", prefill_chunk=2048)
    stages = []
    for stage in recipe.stages:
        stages.append(train_stage(backbone, recipe, stage, tokenizer, log))
        backbone.save_pretrained(out)  # an interrupted run keeps its last finished stage
    train_seconds = time.perf_counter() - t0
    metrics = {}
    if recipe.eval_samples:
        metrics[f"plain_{TASK}_{recipe.eval_length}"] = plain_accuracy(backbone, TASK, recipe.eval_length,
                                                                       recipe.eval_samples)
        log(f"plain {TASK} at {recipe.eval_length}: {metrics[f'plain_{TASK}_{recipe.eval_length}']:.1f}%")
    backbone.save_pretrained(out)
    return write_recipe_record(out, recipe, stages, model, train_seconds, metrics, log)


def write_recipe_record(out: Path, recipe, stages: list[dict], model: torch.nn.Module, train_seconds: float,
                        metrics: dict, log=print) -> dict:
    """recipe.json beside the weights of a NIAH-text recipe (tiny_gdn, tiny_llama_niah): how it was made."""
    record = {
        "recipe": asdict(recipe),
        "data": {"task_style": TASK, "train_streams": f"{STREAM_PREFIX}/{recipe.seed}/<stage>/<step>/<i>",
                 "eval_streams": f"{TASK}/42/<index> (RULER's)"},
        "stages": stages,
        "parameters": sum(p.numel() for p in model.parameters()),
        "train_seconds": round(train_seconds, 1),
        "metrics": metrics,
        "torch": torch.__version__,
        "machine": f"{platform.machine()}, {recipe.threads} threads",
    }
    (out / "recipe.json").write_text(json.dumps(portable_assets(record), indent=2) + "\n")
    log(f"saved {out} ({record['parameters']} parameters, {train_seconds:.0f} s of training)")
    return record
