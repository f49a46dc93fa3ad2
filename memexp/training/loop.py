"""memexp's one training loop: AdamW over what a recipe trains, one learning-rate schedule,
gradient accumulation, global-norm clipping. Every recipe (the paper recipes here, the embedded
models' in memexp.embedded) trains through `train`; what differs between them is what they hand it.

What a recipe provides (`Plan`):
  params       the tensors the optimiser updates (a whole tiny model, LoRA adapters, Titan modules);
  schedule     the learning rate of every update (`Schedule`, read by `lr_at`) and how many updates;
  batches      an iterator of micro-batches, `accumulate` of them per update, in a fixed order;
  loss         micro-batch -> (loss to minimise, tokens read, numbers to log);
  optimiser    AdamW's betas and weight decay, the clip norm, and its saved state on a resume;
  hooks        before an update (switch what the model records), after the gradients (average
               them over ranks), after an update (constraints on the weights), and `on_step`: told
               every finished update (`Step`) and handed the optimiser, it logs and saves what the
               recipe keeps (history, checkpoints) and returns True to stop early.
The recipe builds the model, chooses the data and writes its own files; the loop never looks
inside a batch.

An update: set the lr, then for each micro-batch `(loss / accumulate).backward()`, then the
gradient hook, `clip_grad_norm_`, `AdamW.step`, `zero_grad`, the weight hook, `on_step`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

import torch

DECAYS = ("cosine", "constant")


@dataclass
class Schedule:
    """The learning rate of each of `total` updates: a linear warm-up over the first `warmup`
    updates to `peak`, then `decay` down to `floor` at the last update (cosine) or `peak` kept.

    The warm-up either starts at `warmup_start` (the lr of update 0, as Titan-Llama's code) or,
    with warmup_start None, gives update k the share (k + 1) / warmup of the peak (nanoGPT's
    habit, so that no update has lr 0)."""

    peak: float
    total: int
    warmup: int = 0
    warmup_start: Optional[float] = None
    floor: float = 0.0
    decay: str = "cosine"  # cosine | constant

    def __post_init__(self) -> None:
        if self.decay not in DECAYS:
            raise ValueError(f"schedule.decay={self.decay!r}: allowed values are {', '.join(DECAYS)}")


def lr_at(schedule: Schedule, step: int) -> float:
    """The learning rate of update `step` (counted from 0)."""
    s = schedule
    if step < s.warmup:
        if s.warmup_start is None:
            return s.peak * (step + 1) / s.warmup
        return s.warmup_start + (s.peak - s.warmup_start) * step / s.warmup
    if s.decay == "constant":
        return s.peak
    progress = min((step - s.warmup) / max(s.total - s.warmup, 1), 1.0)
    return s.floor + 0.5 * (s.peak - s.floor) * (1 + math.cos(math.pi * progress))


@dataclass
class Step:
    """One finished update, as `on_step` sees it: `index` updates done (1-based), the lr it took,
    the gradient norm before clipping, the mean loss over its micro-batches, the tokens read and
    the mean of each number the loss reported."""

    index: int
    lr: float
    grad_norm: float
    loss: float
    tokens: int
    numbers: dict[str, float]


def _nothing(*args: Any) -> None:
    return None


@dataclass
class Plan:
    """What a recipe hands the loop (see the module docstring)."""

    params: list[torch.nn.Parameter]
    schedule: Schedule
    batches: Iterator[Any]
    loss: Callable[[Any], tuple[torch.Tensor, int, dict[str, float]]]
    accumulate: int = 1
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.0
    clip: float = 1.0  # max global grad norm; inf measures the norm without clipping
    start: int = 0  # updates already done (a resumed run: the batches continue from there too)
    optimizer_state: Optional[dict] = None  # AdamW's state_dict of a resumed run
    before_step: Callable[[int], None] = _nothing  # update index (from 0) -> None
    after_grads: Callable[[list[torch.nn.Parameter]], None] = _nothing
    after_step: Callable[[], None] = _nothing
    on_step: Callable[[Step, torch.optim.Optimizer], Optional[bool]] = field(default=_nothing)


def train(plan: Plan) -> int:
    """Run the plan's updates from `plan.start` to `plan.schedule.total` (or until `on_step` asks
    to stop); returns the number of updates done, the resumed ones included."""
    opt = torch.optim.AdamW(plan.params, lr=plan.schedule.peak, betas=tuple(plan.betas),
                            weight_decay=plan.weight_decay)
    if plan.optimizer_state is not None:
        opt.load_state_dict(plan.optimizer_state)
    step = plan.start
    while step < plan.schedule.total:
        lr = lr_at(plan.schedule, step)
        for group in opt.param_groups:
            group["lr"] = lr
        plan.before_step(step)
        losses, tokens, numbers = [], 0, {}
        for _ in range(plan.accumulate):
            loss, read, reported = plan.loss(next(plan.batches))
            (loss / plan.accumulate).backward()
            losses.append(loss.item())
            tokens += read
            for key, value in reported.items():
                numbers.setdefault(key, []).append(value)
        plan.after_grads(plan.params)
        norm = float(torch.nn.utils.clip_grad_norm_(plan.params, plan.clip))
        opt.step()
        opt.zero_grad(set_to_none=True)
        plan.after_step()
        step += 1
        done = Step(step, lr, norm, sum(losses) / len(losses), tokens,
                    {key: sum(values) / len(values) for key, values in numbers.items()})
        if plan.on_step(done, opt):
            break
    return step
