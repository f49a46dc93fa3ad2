"""The stage loop of the titan_llama / tiny_titan recipes (see train.py for the run folder)."""

from __future__ import annotations

import itertools
import json
import platform
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import torch

from memexp.core.schema import ASSETS_DIR, ConfigError, portable_assets
from memexp.training.loop import Plan, Step, train
from memexp.training.loss import next_token_loss
from memexp.training.titan_llama.config import Stage, TitanLlamaRecipe
from memexp.training.titan_llama.data import Formatter, stage_stream
from memexp.training.titan_llama.train import Dist, Logger, build, micro_batches, save_checkpoint, schedule

MODULES = "modules"
CHECKPOINT = "checkpoint.pt"


class Budget:
    """recipe.stop_after: optimizer steps this call may still take (None: no limit)."""

    def __init__(self, steps: int | None) -> None:
        self.left = steps

    def spend(self) -> bool:
        """Count one step; True when the call must stop after it."""
        if self.left is None:
            return False
        self.left -= 1
        return self.left <= 0


def train_stage(ctx: dict, stage: Stage, budget: Budget) -> dict:
    """Train one stage from its checkpoint (or from the modules in memory); returns its summary,
    with `finished` False when the budget stopped it first."""
    recipe, backbone, modules, dist, log = ctx["recipe"], ctx["backbone"], ctx["modules"], ctx["dist"], ctx["log"]
    folder = ctx["out"] / stage.name
    folder.mkdir(parents=True, exist_ok=True)
    total = stage.steps(recipe.sequence_length)
    accum = stage.batch_size // (stage.micro_batch_size * dist.world)
    if accum < 1:
        raise ConfigError(f"recipe.stages {stage.name}: batch_size={stage.batch_size} is smaller than "
                          f"micro_batch_size x world size = {stage.micro_batch_size * dist.world}")
    params = [p for p in modules.parameters() if p.requires_grad]
    start, consumed, saved = 0, 0, None
    if (folder / CHECKPOINT).is_file():
        ck = torch.load(folder / CHECKPOINT, map_location=backbone.device, weights_only=False)
        modules.load_state_dict(ck["modules"])
        start, consumed, saved = ck["step"], ck["consumed"], ck["optimizer"]
        log(f"[{stage.name}] resuming at step {start}/{total} ({consumed} micro-batches read)")
    batches = micro_batches(stage_stream(recipe, stage, ctx["fmt"], ctx["extra_data"]), stage, recipe,
                            backbone.tokenizer.eos_id, ctx["segment"], dist.rank, dist.world)
    batches = itertools.islice(batches, consumed, None)  # the deterministic stream, re-read to where it was
    t0, read = time.perf_counter(), {"tokens": 0, "consumed": consumed}

    def collect(step: int) -> bool:
        return (step + 1) % recipe.log_every == 0 or step + 1 == total

    def loss(batch):
        ids, labels = (t.to(backbone.device) for t in batch)
        read["consumed"] += 1
        # from the hidden states, projected a chunk at a time: never [B, T, vocab] logits at once
        value, accuracy = next_token_loss(backbone.train_hidden(ids), backbone.model.lm_head, labels)
        return value, ids.numel(), {"accuracy": accuracy}

    def on_step(step: Step, opt) -> bool:
        read["tokens"] += step.tokens
        stop = budget.spend()
        if collect(step.index - 1):
            ctx["logger"]({"stage": stage.name, "step": step.index, "global_step": ctx["offset"] + step.index,
                           "loss": step.loss, "accuracy": step.numbers["accuracy"], "lr": step.lr,
                           "grad_norm": step.grad_norm,
                           "tokens_per_s": read["tokens"] / max(time.perf_counter() - t0, 1e-9), **modules.stats()})
            log(f"[{stage.name}] step {step.index}/{total} loss {step.loss:.4f} accuracy "
                f"{step.numbers['accuracy']:.3f} lr {step.lr:.2e}")
        if dist.main and (step.index % stage.save_every == 0 or step.index >= total or stop):
            save_checkpoint(folder / CHECKPOINT, modules, opt, step.index, read["consumed"], stage)
        return stop

    # the layers' lambda, theta, eta, alpha, inner loss are kept on logged steps only (retrofit.py)
    done = train(Plan(params, schedule(stage, total), batches, loss, accumulate=accum, betas=tuple(recipe.betas),
                      weight_decay=recipe.weight_decay, clip=recipe.grad_clip if recipe.grad_clip > 0 else float("inf"),
                      start=start, optimizer_state=saved, before_step=lambda step: modules.record_stats(collect(step)),
                      after_grads=dist.average, on_step=on_step))
    if done < total:
        return {"name": stage.name, "steps": done, "of": total, "finished": False}
    if dist.main:
        modules.save(folder / MODULES)
    return {"name": stage.name, "steps": done, "of": total, "finished": True,
            "seconds": round(time.perf_counter() - t0, 1)}


def _stages(recipe: TitanLlamaRecipe) -> tuple[list[Stage], Path | None]:
    """The stages this call runs and the modules folder the first one starts from."""
    out = Path(recipe.output)
    if recipe.only is None:
        return list(recipe.stages), recipe.init_from and Path(recipe.init_from)
    i = [s.name for s in recipe.stages].index(recipe.only)
    if i == 0:
        return [recipe.stages[0]], recipe.init_from and Path(recipe.init_from)
    before = out / recipe.stages[i - 1].name / MODULES
    if not before.is_dir():
        raise ConfigError(f"recipe.only={recipe.only}: {before} is missing; run stage "
                          f"{recipe.stages[i - 1].name!r} first (same recipe.output)")
    return [recipe.stages[i]], before


def run(recipe: TitanLlamaRecipe, log=print, extra_data: dict | None = None) -> dict:
    """Every stage in order (a finished stage is skipped: its modules are read back); the record
    of the call in <output>/recipe.json. `extra_data`: stage data a recipe built on this one brings
    (data.stage_stream)."""
    if recipe.replace_assets and not recipe.output:
        recipe.output = str(Path("outputs") / "train" / recipe.asset / time.strftime("%Y%m%d-%H%M%S"))
    if not recipe.output:
        raise ConfigError("recipe.output is null: name the run folder (the CLI picks outputs/train/<recipe>/<time>)")
    if recipe.threads:
        torch.set_num_threads(recipe.threads)
    torch.manual_seed(recipe.seed)
    dist = Dist()
    out = Path(recipe.output)
    out.mkdir(parents=True, exist_ok=True)
    backbone, titan, modules = build(recipe, dist)
    stages, start = _stages(recipe)
    if start is not None:
        modules.load(start)
    ctx = {"recipe": recipe, "backbone": backbone, "modules": modules, "dist": dist, "log": log, "out": out,
           "fmt": Formatter(backbone), "segment": titan.segment_length,
           "logger": Logger(recipe, out, out.name, dist.main, log), "offset": 0, "extra_data": extra_data}
    budget, done = Budget(recipe.stop_after), []
    for stage in stages:
        if (out / stage.name / MODULES).is_dir():
            modules.load(out / stage.name / MODULES)
            done.append({"name": stage.name, "finished": True, "skipped": "already trained"})
        else:
            done.append(train_stage(ctx, stage, budget))
        ctx["offset"] += stage.steps(recipe.sequence_length)
        if not done[-1]["finished"]:
            log(f"stopped after recipe.stop_after={recipe.stop_after} steps; the same command resumes")
            break
    record = {"recipe": asdict(recipe), "stages": done, "method": asdict(titan),
              "trainable_parameters": sum(p.numel() for p in modules.parameters() if p.requires_grad),
              "world_size": dist.world, "torch": torch.__version__, "machine": platform.machine()}
    if dist.main:
        (out / "recipe.json").write_text(json.dumps(portable_assets(record), indent=2) + "\n")
        if recipe.replace_assets and done[-1]["finished"]:
            ship(out / stages[-1].name / MODULES, out / "recipe.json", ASSETS_DIR / recipe.asset, log)
    return record


def ship(modules: Path, record: Path, target: Path, log=print) -> None:
    """memexp/assets/<asset>: the finished modules (what method.memory_path reads) and recipe.json."""
    target.mkdir(parents=True, exist_ok=True)
    for f in (*sorted(modules.iterdir()), record):
        shutil.copyfile(f, target / f.name)
    log(f"shipped {modules} and {record.name} to {target}")
