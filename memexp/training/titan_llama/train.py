"""`python -m memexp train recipe=titan_llama` (and tiny_titan): Titan-Llama post-training.

The backbone is frozen and retrofitted (memexp.methods.titan.retrofit); the outer loss is the
next-token cross entropy of `backbone.train_forward` through the memories' inner updates (the
code's detach_inner_grads=false), mean over the supervised tokens of each micro-batch, averaged
over the gradient-accumulation steps. AdamW (recipe.betas, weight_decay) on the Titan modules, gradient
clip recipe.grad_clip, the stage's warmup + cosine schedule: memexp.training.loop's `train`.

Precision: memexp trains the Titan modules in fp32 and the memory computes in fp32 whatever the
backbone's dtype (method.memory_dtype=float32, the only value a recipe takes). The authors' code does
not: its whole model, Titan layers included, runs in bf16 (TrainingConfig.model_dtype='bfloat16'), and
only its optimizer keeps fp32 master weights and moments (fp32_adamw.py FP32AdamW, "model compute dtype
unchanged"). Their modules therefore saw bf16 forward and inner-update arithmetic; evaluating their
checkpoint in that precision is method.memory_dtype=bfloat16.

Run folder (recipe.output), one sub-folder per stage:
  <stage>/checkpoint.pt   modules, optimizer, step and sequences consumed; written atomically every
                          save_every steps; the same command resumes from it (a resumed run equals
                          an uninterrupted one: the data streams are deterministic and re-read);
  <stage>/modules/        the finished stage's TitanModules.save (method.memory_path=<it> runs it);
  metrics.jsonl           one line per logged step (loss, accuracy, lr, grad norm, and each layer's
                          lambda, theta, eta, alpha and inner loss: TitanModules.stats()).
torchrun: every rank reads the sequences i with i % world_size == rank; gradients are averaged
with all_reduce before clipping (the modules are not wrapped in DDP: the forward runs through the
backbone, not through them). Only rank 0 writes.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Iterator

import torch

from memexp.core.schema import _build
from memexp.training.loop import Schedule
from memexp.training.titan_llama.config import Stage, TitanLlamaRecipe
from memexp.training.titan_llama.data import IGNORE


def schedule(stage: Stage, total: int) -> Schedule:
    """The code's neural_mem_lr_lambda: linear from warmup_start_lr to lr over warmup_steps, then
    cosine from lr to min_lr over the remaining steps of `total`."""
    return Schedule(peak=stage.lr, total=total, warmup=stage.warmup_steps, warmup_start=stage.warmup_start_lr,
                    floor=stage.min_lr)


def micro_batches(stream: Iterator, stage: Stage, recipe: TitanLlamaRecipe, pad_id: int, segment: int,
                  rank: int = 0, world: int = 1) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(ids [b, T], labels [b, T]) of this rank's sequences, right-padded (EOS ids, IGNORE labels) to
    the longest, rounded up to whole segments (at most sequence_length) with recipe.pad_to_segment."""
    group = []
    for i, seq in enumerate(stream):
        if i % world != rank:
            continue
        group.append(seq)
        if len(group) < stage.micro_batch_size:
            continue
        longest = max(len(s.ids) for s in group)
        T = min(recipe.sequence_length, -(-longest // segment) * segment) if recipe.pad_to_segment else longest
        ids = torch.full((len(group), T), pad_id, dtype=torch.long)
        labels = torch.full((len(group), T), IGNORE, dtype=torch.long)
        for b, s in enumerate(group):
            ids[b, :len(s.ids)] = torch.tensor(s.ids[:T])
            labels[b, :len(s.labels)] = torch.tensor(s.labels[:T])
        group = []
        yield ids, labels


class Dist:
    """torchrun's rank and world size (1 process without it)."""

    def __init__(self) -> None:
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local = int(os.environ.get("LOCAL_RANK", "0"))
        if self.world > 1:
            import torch.distributed as dist

            if not dist.is_initialized():
                dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")

    @property
    def main(self) -> bool:
        return self.rank == 0

    def average(self, params) -> None:
        if self.world == 1:
            return
        import torch.distributed as dist

        for p in params:
            if p.grad is not None:
                dist.all_reduce(p.grad)
                p.grad /= self.world


def build(recipe: TitanLlamaRecipe, dist: Dist):
    """(backbone, TitanConfig, TitanModules): the frozen backbone retrofitted."""
    from omegaconf import OmegaConf

    from memexp.backbones import backbone_config, load_backbone
    from memexp.methods.titan.config import TitanConfig
    from memexp.methods.titan.retrofit import retrofit

    base = OmegaConf.create(asdict(backbone_config(recipe.backbone)))
    fields = OmegaConf.merge(base, OmegaConf.create(dict(recipe.backbone_fields)))
    if fields.pretrained is not None and "model" not in recipe.backbone_fields:
        fields.model = {}  # a checkpoint carries its architecture (a random-init base names one)
    if dist.world > 1 and torch.cuda.is_available():
        torch.cuda.set_device(dist.local)
        fields.device = "cuda"
    backbone = load_backbone(OmegaConf.to_container(fields))
    titan = _build(TitanConfig, OmegaConf.create({"name": "titan", **recipe.method}), "recipe.method")
    return backbone, titan, retrofit(backbone, titan)


def save_checkpoint(path: Path, modules, opt, step: int, consumed: int, stage: Stage) -> None:
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    torch.save({"stage": stage.name, "step": step, "consumed": consumed, "modules": modules.state_dict(),
                "optimizer": opt.state_dict()}, tmp)
    os.replace(tmp, path)


class Logger:
    """metrics.jsonl always; W&B too with recipe.wandb (never fails the run)."""

    def __init__(self, recipe: TitanLlamaRecipe, out: Path, name: str, main: bool, log) -> None:
        self.path, self.main, self.log, self.run = out / "metrics.jsonl", main, log, None
        if not main or recipe.wandb == "none":
            return
        from memexp.core.schema import LoggerConfig
        from memexp.run.tracking import resolve_mode

        mode = resolve_mode(LoggerConfig(name="wandb", mode="auto" if recipe.wandb == "auto" else recipe.wandb))
        try:
            import wandb

            run_id = f"{name}-{hashlib.sha1(str(out.resolve()).encode()).hexdigest()[:12]}"
            self.run = wandb.init(project=recipe.wandb_project, name=f"{name} {out.name}", id=run_id,
                                  resume="allow", mode=mode, config=asdict(recipe), dir=str(out))
        except Exception as e:  # W&B is a mirror: local metrics are the record
            log(f"W&B unavailable ({type(e).__name__}: {e}); metrics.jsonl only")

    def __call__(self, row: dict) -> None:
        if not self.main:
            return
        with open(self.path, "a") as f:
            f.write(json.dumps(row) + "\n")
        if self.run is not None:
            try:
                self.run.log({f"{row['stage']}/{k}": v for k, v in row.items() if k != "stage"}, step=row["global_step"])
            except Exception as e:
                self.log(f"W&B log failed ({type(e).__name__}); continuing with metrics.jsonl")
                self.run = None
