"""Training read adapters (NoteBank paper App. B.4, C.4): `python -m memexp train recipe=notebank_lora backbone=<name>`.

Each example: the context is read and notes are written with the adapters off (NoteBank's own
`read`, with the backbone's NoteBank settings), the question is probed and routed with them
off (`NoteBank.select`), and only then, with the adapters on, the replay, the question and the
answer are read teacher-forced from a copy of the context state (`train_forward(state=...)`).
The state and the chosen notes are constants (computed without autograd); the loss is the mean
NLL of the answer tokens including EOS, so gradients reach the adapters through the replay and
the question. `replay=false` is the Table 4 control (Plain + LoRA): Plain reads the context and
the question follows it directly. Updates: AdamW over the adapters only, `accumulate` examples
each, global-norm clipping.

The output folder is an adapter folder (memexp.methods.read_adapter): adapter_config.json,
adapter_model.safetensors, notebank_lora.json. Checkpoints (`.checkpoint/`, hidden: not part of
the adapter's identity) are written every `checkpoint_every` updates; the same command resumes
from the last one and ends with the adapter an uninterrupted run makes.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch
import torch.nn.functional as F

from memexp.adapters import LoRAConfig, attach_lora, freeze_base, save_adapters
from memexp.backbones.base import Stopwatch
from memexp.core.file_digest import weights_fingerprint
from memexp.core.schema import ASSETS_DIR, ConfigError, portable_assets
from memexp.methods.read_adapter import META_FILE, model_shape
from memexp.methods.rescale import apply_rescale
from memexp.training.loop import Plan, Schedule, Step, train
from memexp.training.notebank_lora.data import TrainExample, draw, tokenize
from memexp.training.notebank_lora.recipe import NoteBankLoRARecipe

CHECKPOINT = ".checkpoint"
# recipe fields that change how a run is watched or where it writes, not the adapter it makes
NOT_SEMANTIC = ("output", "replace_assets", "asset", "threads", "log_every", "logger", "checkpoint_every",
                "cache_reads")


def run_config(recipe: NoteBankLoRARecipe, composed):
    """The run configuration the adapter is trained for: `composed`, the backbone with its
    NoteBank (or Plain, without replay) settings as `memexp run` composes `recipe.run_arguments()`
    (memexp.cli.train.run_config does; training never imports the app), with recipe.notebank's
    fields over the method's."""
    if recipe.replay and recipe.notebank:
        composed.method = replace(composed.method, **recipe.notebank)
    return composed


def read_example(backbone, method, ex: TrainExample, replay: bool) -> tuple[object, list[int]]:
    """(context state, replayed note ids) of one example: read, written, probed and routed with
    the adapters off and without autograd, so they are constants of the adapters' training."""
    with torch.no_grad():
        memory = method.read(backbone, ex.context_ids)
        notes = method.select(backbone, memory, ex.question_ids, ex.question, Stopwatch())[1] if replay else []
    return memory.state, notes


def example_loss(backbone, method, lora, ex: TrainExample, replay: bool, read=None) -> tuple[torch.Tensor, int]:
    """(mean NLL of the target tokens, tokens read with the adapters on) of one example; `read`:
    its `read_example` when already computed (never modified here: the state is cloned)."""
    context_state, notes = read if read is not None else read_example(backbone, method, ex, replay)
    state = context_state.clone()
    apply_rescale(state, method.cfg.rescale)
    ids = notes + ex.question_ids + ex.target_ids[:-1]
    first = len(notes) + len(ex.question_ids) - 1  # the position that predicts the first answer token
    with lora.enabled():
        hidden = backbone.train_hidden(torch.tensor([ids], device=backbone.device), state=state)[0]
        logits = backbone.model.lm_head(hidden[first:])  # the scored positions only, never the whole vocabulary x replay
    target = torch.tensor(ex.target_ids, device=logits.device)
    return F.cross_entropy(logits.float(), target), len(ids)


def schedule(recipe: NoteBankLoRARecipe) -> Schedule:
    """`warmup` linear steps, then constant or cosine to 10 % of lr."""
    return Schedule(peak=recipe.lr, total=recipe.steps, warmup=recipe.warmup, floor=0.1 * recipe.lr,
                    decay=recipe.schedule)


# data fields added after adapters were shipped: they only read NQ rows, so for another source they
# are left out of the recipe's identity (a shipped RULER-trained adapter stays this recipe's)
NQ_ONLY_FIELDS = ("prompt_field", "completion_field", "long_answer_marker", "gold_marker", "heldout")


def semantic(recipe: NoteBankLoRARecipe) -> dict:
    out = {k: v for k, v in asdict(recipe).items() if k not in NOT_SEMANTIC}
    if recipe.data.source != "nq":
        out["data"] = {k: v for k, v in out["data"].items() if k not in NQ_ONLY_FIELDS}
    return out


def output_dir(recipe: NoteBankLoRARecipe) -> Path:
    if recipe.replace_assets:
        return ASSETS_DIR / recipe.asset
    if not recipe.output:
        raise ConfigError("recipe.output is null: name a folder (the CLI picks outputs/train/notebank_lora/<time>)")
    return Path(recipe.output).expanduser()


def save_checkpoint(out: Path, recipe, step: int, lora, opt, history: list, weights: str | None) -> None:
    """Atomically: the adapter tensors, the optimiser and the loss history after `step` updates."""
    folder = out / CHECKPOINT
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "state.pt.tmp"
    torch.save({"step": step, "recipe": semantic(recipe), "weights": weights, "lora": lora.tensors(),
                "optimizer": opt.state_dict(), "history": history}, tmp)
    os.replace(tmp, folder / "state.pt")


def resume(out: Path, recipe, lora, weights: str | None) -> tuple[int, list, dict | None]:
    """(updates already done, their history, the optimiser's state) from the last checkpoint in
    `out` (its adapter tensors loaded into `lora`), or (0, [], None)."""
    path = out / CHECKPOINT / "state.pt"
    if not path.exists():
        return 0, [], None
    saved = torch.load(path, weights_only=False)
    if saved["recipe"] != semantic(recipe):
        differs = next(k for k in semantic(recipe) if saved["recipe"].get(k) != semantic(recipe)[k])
        raise ConfigError(f"recipe.output={out}: holds a checkpoint of another recipe (recipe.{differs} differs); "
                          f"choose another recipe.output or remove {path.parent}")
    if saved.get("weights") != weights:
        raise ConfigError(f"recipe.output={out}: holds a checkpoint trained on other {recipe.backbone} weights "
                          f"({saved.get('weights')}, now {weights}); choose another recipe.output or remove "
                          f"{path.parent}")
    lora.load_tensors(saved["lora"])
    return saved["step"], saved["history"], saved["optimizer"]


def already_done(out: Path, recipe, weights: str | None) -> dict | None:
    """The record of a finished adapter of this recipe on these base weights in `out`, None when
    there is none. A finished adapter of another recipe or of other weights is replaced under
    replace_assets (what the flag asks for) and never overwritten elsewhere (one-line ConfigError)."""
    meta = out / META_FILE
    if not meta.exists() or (out / CHECKPOINT).exists():
        return None
    record = json.loads(meta.read_text())
    mine = json.loads(json.dumps(portable_assets(semantic(recipe))))  # as the record writes it
    if record.get("recipe_semantic") != mine:
        differs = next((k for k in mine if record.get("recipe_semantic", {}).get(k) != mine[k]), "recipe")
        if recipe.replace_assets:
            return None
        raise ConfigError(f"recipe.output={out}: holds an adapter of another recipe (recipe.{differs} differs); "
                          f"choose another recipe.output")
    trained = record.get("backbone", {}).get("weights")
    if trained != weights:
        if recipe.replace_assets:
            return None
        raise ConfigError(f"recipe.output={out}: holds an adapter trained on other {recipe.backbone} weights "
                          f"({trained}, now {weights}); choose another recipe.output")
    return record


def run(recipe: NoteBankLoRARecipe, log=print, *, cfg) -> dict:
    """Train (or resume, or find done) the adapter for `cfg`, the run configuration the app composes
    from `recipe.run_arguments()` (memexp.cli.train passes it); returns what notebank_lora.json records."""
    from memexp.backbones import load_backbone
    from memexp.methods import build_method

    out = output_dir(recipe)
    cfg = run_config(recipe, cfg)
    # the weights the adapter trains on: one learned on other weights of the same shape is not
    # this recipe's result (memexp.core.file_digest.weights_fingerprint)
    weights = weights_fingerprint(cfg.backbone.pretrained)
    done = already_done(out, recipe, weights)
    if done is not None:
        log(f"{out}: already trained by this recipe ({done['steps']} updates); nothing to do")
        return done
    torch.set_num_threads(recipe.threads)
    backbone = load_backbone(cfg.backbone)
    freeze_base(backbone)
    method = build_method(cfg.method)
    lora = attach_lora(backbone, LoRAConfig(targets=recipe.lora.targets(), rank=recipe.lora.rank,
                                            alpha=recipe.lora.alpha, dropout=recipe.lora.dropout,
                                            rows=dict(recipe.lora.rows), seed=recipe.lora.seed))
    texts = draw(recipe.data, recipe.data_path, backbone.tokenizer)
    log(texts.summary() if recipe.data.source == "nq" else f"{len(texts.drawn)} RULER examples (all answerable)")
    examples = [tokenize(t, recipe.data, backbone.tokenizer) for t in texts.drawn]
    start, history, saved = resume(out, recipe, lora, weights)
    if start:
        log(f"resuming {out} after update {start}/{recipe.steps}")
    sink = _logger(recipe, out)
    reads = {}  # example index -> read_example, with recipe.cache_reads (identical on every pass)

    def batches():  # example indices, `accumulate` per update, cycling through the pool
        i = start * recipe.accumulate
        while True:
            yield i % len(examples)
            i += 1

    def loss(i: int):
        if recipe.cache_reads and i not in reads:
            reads[i] = read_example(backbone, method, examples[i], recipe.replay)
        value, tokens = example_loss(backbone, method, lora, examples[i], recipe.replay, reads.get(i))
        return value, tokens, {}

    t0, window = time.perf_counter(), []

    def on_step(step: Step, opt) -> None:
        nonlocal t0, window
        row = {"step": step.index, "loss": step.loss, "lr": step.lr, "grad_norm": step.grad_norm, "tokens": step.tokens}
        history.append(row)
        window.append(row)
        seconds = time.perf_counter() - t0
        sink(row, sum(r["tokens"] for r in window) / max(seconds, 1e-9))
        if step.index % recipe.log_every == 0 or step.index == recipe.steps:
            log(f"update {step.index}/{recipe.steps} loss {sum(r['loss'] for r in window) / len(window):.4f} "
                f"grad norm {step.grad_norm:.3f} lr {row['lr']:.1e} "
                f"({sum(r['tokens'] for r in window) / max(seconds, 1e-9):.0f} tok/s)")
        if step.index % recipe.checkpoint_every == 0 and step.index < recipe.steps:
            save_checkpoint(out, recipe, step.index, lora, opt, history, weights)
            log(f"checkpoint {out / CHECKPOINT} at update {step.index}")
        if step.index % recipe.log_every == 0:
            t0, window = time.perf_counter(), []

    lora.train()
    train(Plan(lora.trainable_parameters(), schedule(recipe), batches(), loss, accumulate=recipe.accumulate,
               betas=tuple(recipe.betas), weight_decay=recipe.weight_decay, clip=recipe.clip, start=start,
               optimizer_state=saved, on_step=on_step))
    lora.eval()
    return finish(out, recipe, cfg, backbone, lora, examples, history, weights, log, texts.counts())


def finish(out: Path, recipe, cfg, backbone, lora, examples, history, weights, log, pool: dict | None = None) -> dict:
    """Write the adapter folder (tensors, spec, notebank_lora.json) and drop the checkpoint."""
    digest = save_adapters(lora, out)
    record = {
        "backbone": {"name": cfg.backbone.name, "arch": cfg.backbone.arch, "shape": model_shape(backbone.config),
                     "weights": weights},
        "method": cfg.method.name,
        "r": recipe.lora.rank, "alpha": recipe.lora.alpha, "layers": list(recipe.lora.layers),
        "targets": list(recipe.lora.modules), "rows": dict(recipe.lora.rows),
        "replay_budget": cfg.method.replay_budget if recipe.replay else None,
        "notebank": asdict(cfg.method) if recipe.replay else None,
        "recipe": asdict(recipe), "recipe_semantic": semantic(recipe),
        "steps": len(history), "examples": len(examples),
        "answerable": sum(ex.text.answerable for ex in examples),
        "pool": pool,  # PoolDraw.counts(): the pool and the draw as found (App. C.4: 5,855 = 4,157 + 1,698; 2,400 = 1,722 + 678)
        "tokens": sum(r["tokens"] for r in history),
        "loss_first": history[0]["loss"] if history else None, "loss_last": history[-1]["loss"] if history else None,
        "history": history, "content_hash": digest,
        "torch": torch.__version__, "machine": f"{platform.machine()}, {recipe.threads} threads",
    }
    (out / META_FILE).write_text(json.dumps(portable_assets(record), indent=1) + "\n")
    shutil.rmtree(out / CHECKPOINT, ignore_errors=True)
    log(f"saved {out} ({sum(p.numel() for p in lora.trainable_parameters())} adapter parameters, "
        f"{record['tokens']} tokens, loss {record['loss_first']:.4f} -> {record['loss_last']:.4f})")
    return record


def _logger(recipe: NoteBankLoRARecipe, out: Path):
    """row, tokens/s -> W&B history (logger.name=wandb), else nothing (the terminal lines suffice)."""
    if recipe.logger.name != "wandb":
        return lambda row, rate: None
    from memexp.run.tracking import resolve_mode

    try:
        import wandb

        run = wandb.init(project=recipe.logger.project, entity=recipe.logger.entity, mode=resolve_mode(recipe.logger),
                         name=f"notebank_lora | {recipe.backbone} | {'replay' if recipe.replay else 'plain'}",
                         config=asdict(recipe), dir=str(out), tags=list(recipe.logger.tags), resume="allow",
                         id=_wandb_id(out))
    except Exception as e:  # W&B never stops training (memexp.run.tracking's rule)
        print(f"[memexp] W&B unavailable ({type(e).__name__}: {e}); training continues without it")
        return lambda row, rate: None

    def log_row(row: dict, rate: float) -> None:
        run.log({"train/loss": row["loss"], "train/lr": row["lr"], "train/grad_norm": row["grad_norm"],
                 "train/tokens_per_s": rate}, step=row["step"])
        if row["step"] == recipe.steps:
            run.finish()
    return log_row


def _wandb_id(out: Path) -> str:
    """One W&B run per adapter folder, kept across resumes."""
    path = out / CHECKPOINT / "wandb_id.txt"
    if not path.exists():
        import uuid

        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(uuid.uuid4().hex[:8])
    return path.read_text().strip()
