"""memexp.training.loss.next_token_loss: the loss from hidden states, the vocabulary projection a
chunk of positions at a time. Checked against the whole-sequence form written out here (full
logits, log-softmax, the mean over supervised targets) for value, accuracy and gradients, and for
memory by the largest tensor any operation allocates in the forward and the backward, on a tiny
model with a large vocabulary."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from memexp.training.loss import IGNORE, next_token_loss

B, T, D, V, CHUNK = 2, 700, 16, 8192, 64


class LargestTensor(TorchDispatchMode):
    """The most elements any operation's output holds while active (forward and backward), and how
    many vocabulary projections ran."""

    def __init__(self) -> None:
        super().__init__()
        self.largest, self.projections = 0, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        # a vocabulary projection: a matrix product whose output rows are logits
        self.projections += int(func.__name__.startswith(("mm", "addmm", "bmm")) and out.shape[-1] == V)
        return out


def inputs(scored_from: int = 0):
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(B, T, D, generator=g, requires_grad=True)
    head = torch.nn.Linear(D, V, bias=False)
    with torch.no_grad():
        head.weight.copy_(torch.randn(V, D, generator=g))
    labels = torch.randint(0, V, (B, T), generator=g)
    labels[:, :scored_from] = IGNORE
    labels[0, scored_from + 5:scored_from + 9] = IGNORE
    return hidden, head, labels


def whole_sequence(hidden, head, labels):
    """The form without chunks: every position's logits at once."""
    logp = F.log_softmax(head(hidden).float(), -1)[:, :-1]
    y = labels[:, 1:]
    mask = y != IGNORE
    picked = logp.gather(-1, y.clamp_min(0)[..., None])[..., 0]
    hits = (logp.argmax(-1) == y) & mask
    return -(picked * mask).sum() / mask.sum(), hits.sum().item() / mask.sum().item()


@pytest.mark.parametrize("scored_from", [0, 600])
def test_value_accuracy_and_gradients_equal_the_whole_sequence_form(scored_from):
    hidden, head, labels = inputs(scored_from)
    want, want_acc = whole_sequence(hidden, head, labels)
    want.backward()
    want_h, want_w = hidden.grad.clone(), head.weight.grad.clone()
    hidden.grad, head.weight.grad = None, None
    got, acc = next_token_loss(hidden, head, labels, chunk=CHUNK)
    got.backward()
    torch.testing.assert_close(got, want)
    assert acc == pytest.approx(want_acc)
    torch.testing.assert_close(hidden.grad, want_h)
    torch.testing.assert_close(head.weight.grad, want_w)


def test_no_tensor_holds_the_whole_sequences_logits():
    hidden, head, labels = inputs()
    with LargestTensor() as naive:
        whole_sequence(hidden, head, labels)[0].backward()
    with LargestTensor() as chunked:
        next_token_loss(hidden, head, labels, chunk=CHUNK)[0].backward()
    assert naive.largest >= B * (T - 1) * V  # the logits of every position
    assert chunked.largest <= B * CHUNK * V  # one chunk's logits at most, forward and backward
    assert naive.largest >= 10 * chunked.largest


def test_chunks_without_a_supervised_target_are_never_projected():
    chunks = -(-(T - 1) // CHUNK)
    hidden, head, labels = inputs()
    with LargestTensor() as every:
        next_token_loss(hidden, head, labels, chunk=CHUNK)[0].backward()
    assert every.projections == 2 * chunks  # each chunk: the forward, and the backward's recomputation
    hidden, head, labels = inputs(scored_from=T - 20)  # an SFT sequence: the answer at the end, in one chunk
    with LargestTensor() as answer_only:
        next_token_loss(hidden, head, labels, chunk=CHUNK)[0].backward()
    assert answer_only.projections == 2


def test_nothing_scored_is_a_zero_loss_with_a_gradient_path():
    hidden, head, labels = inputs()
    labels[:] = IGNORE
    loss, acc = next_token_loss(hidden, head, labels)
    assert loss.item() == 0.0 and acc == 0.0 and loss.requires_grad
