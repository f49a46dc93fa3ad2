"""memexp.training.loop: the schedule's values (worked by hand), accumulation, clipping, the
hooks' order, resume and early stop."""

from __future__ import annotations

import math

import pytest
import torch

from memexp.training.loop import Plan, Schedule, lr_at, train


def test_the_nanogpt_warm_up_gives_update_k_its_share_then_cosine_to_the_floor():
    s = Schedule(peak=1.0, total=12, warmup=4, floor=0.1)
    assert [lr_at(s, k) for k in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert lr_at(s, 4) == 1.0
    assert lr_at(s, 8) == pytest.approx(0.55)  # half way through the 8 cosine updates: (1 + 0.1) / 2
    assert lr_at(s, 11) == pytest.approx(0.1 + 0.45 * (1 + math.cos(math.pi * 7 / 8)))
    assert lr_at(s, 40) == pytest.approx(0.1)  # past the end: the floor


def test_the_titan_warm_up_starts_at_its_start_lr_and_constant_keeps_the_peak():
    s = Schedule(peak=1.0, total=10, warmup=2, warmup_start=0.2, floor=0.0)
    assert [lr_at(s, k) for k in range(3)] == [0.2, pytest.approx(0.6), 1.0]
    c = Schedule(peak=0.3, total=10, warmup=3, decay="constant")
    assert [lr_at(c, k) for k in (0, 2, 3, 9)] == [pytest.approx(0.1), pytest.approx(0.3), 0.3, 0.3]
    with pytest.raises(ValueError, match="schedule.decay='linear'"):
        Schedule(peak=1.0, total=1, decay="linear")


def quadratic_plan(w: torch.nn.Parameter, **fields) -> Plan:
    """Loss (w - x)^2 / 2 for micro-batches x = 1, 2, 3, ...: its gradient is w - x."""
    batches = iter(float(x) for x in range(1, 100))
    return Plan([w], Schedule(peak=0.1, total=3, decay="constant"), batches,
                lambda x: ((w - x) ** 2 / 2, 1, {"x": x}), **fields)


def test_accumulated_micro_batches_average_their_gradients_and_report_means():
    w = torch.nn.Parameter(torch.zeros(()))
    steps, grads = [], []
    plan = quadratic_plan(w, accumulate=2, clip=float("inf"),
                          after_grads=lambda params: grads.append(params[0].grad.item()),
                          on_step=lambda step, opt: steps.append(step))
    assert train(plan) == 3
    # update 1 reads x = 1, 2 at w = 0: gradient mean(-1, -2) = -1.5
    assert grads[0] == pytest.approx(-1.5)
    assert [s.index for s in steps] == [1, 2, 3] and [s.tokens for s in steps] == [2, 2, 2]
    assert steps[0].loss == pytest.approx((0.5 + 2.0) / 2) and steps[0].numbers == {"x": 1.5}
    assert steps[0].grad_norm == pytest.approx(1.5) and steps[0].lr == pytest.approx(0.1)
    assert steps[1].numbers == {"x": 3.5}  # the batches continue: x = 3, 4


def test_clipping_scales_the_gradient_to_the_clip_norm_and_reports_the_norm_before():
    w = torch.nn.Parameter(torch.zeros(()))
    seen = []
    plan = quadratic_plan(w, clip=0.5, on_step=lambda step, opt: seen.append(step.grad_norm) or True)
    plan.after_step = lambda: seen.append(w.grad)  # zeroed before the weight hook
    assert train(plan) == 1  # on_step returned True: stop after the first update
    assert seen == [None, pytest.approx(1.0)]


def test_a_resumed_plan_equals_an_uninterrupted_one():
    straight = torch.nn.Parameter(torch.zeros(()))
    train(quadratic_plan(straight))
    cut = torch.nn.Parameter(torch.zeros(()))
    saved = {}

    def stop_after_one(step, opt):
        saved.update(opt.state_dict())
        return True

    assert train(quadratic_plan(cut, on_step=stop_after_one)) == 1
    rest = quadratic_plan(cut, start=1, optimizer_state=saved)
    rest.batches = iter(float(x) for x in range(2, 100))  # the stream re-read from where it was
    assert train(rest) == 3
    assert torch.equal(straight, cut)


def test_before_step_sees_each_update_index_from_the_start():
    w = torch.nn.Parameter(torch.zeros(()))
    seen = []
    plan = quadratic_plan(w, start=1, before_step=seen.append)
    plan.schedule = Schedule(peak=0.1, total=4, decay="constant")
    assert train(plan) == 4 and seen == [1, 2, 3]
