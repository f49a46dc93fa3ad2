"""The routing kernel equals `route_votes_reference`: scores, first-argmax ties, vote histogram."""

import sys
import types

import pytest
import torch

from memexp.kernels import dispatch
from memexp.kernels.routing import route_votes
from memexp.kernels.routing.reference import route_votes_reference


def rel_rms(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b.float()).pow(2).mean().sqrt() / b.float().pow(2).mean().sqrt().clamp_min(1e-12)).item()


def check(addresses: torch.Tensor, queries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    from memexp.kernels.routing.triton import route_votes_triton

    votes, best, scores = route_votes_triton(addresses, queries)
    ref_votes, ref_best, ref_scores = route_votes_reference(addresses.cpu(), queries.cpu())
    votes, best, scores = votes.cpu(), best.cpu(), scores.cpu()
    assert votes.dtype == best.dtype == torch.int64 and scores.dtype == torch.float32
    assert scores.shape == ref_scores.shape and votes.shape == ref_votes.shape and best.shape == ref_best.shape
    assert rel_rms(scores, ref_scores) < 1e-5
    # A channel must pick the reference's note unless the two best notes are within rounding.
    top2 = ref_scores.topk(min(2, ref_scores.shape[1]), dim=1).values
    clear = (top2[:, 0] - top2[:, -1] > 1e-5) | (ref_scores.shape[1] == 1)
    assert torch.equal(best[clear], ref_best[clear])
    first = torch.where(scores == scores.amax(1, keepdim=True), torch.arange(scores.shape[1]), scores.shape[1]).amin(1)
    assert torch.equal(best, first)  # ties in the kernel's own scores go to the lowest index
    assert torch.equal(votes, torch.bincount(best, minlength=addresses.shape[0]))
    return votes, best, scores


SHAPES = [  # (notes, channels, question tokens, d, dtype)
    (1, 3, 1, 16, torch.float32),  # one note, one question token
    (100, 4, 5, 16, torch.bfloat16),  # notes not a multiple of the block
    (70, 2, 17, 256, torch.bfloat16),  # identity addresses (d_rho = d_k = 256), question over two blocks
    (300, 2, 3, 10, torch.float32),  # d not a power of two; the vote scans two blocks
]


@pytest.mark.parametrize("n,ch,t,d,dtype", SHAPES)
def test_kernel_equals_reference(device, n, ch, t, d, dtype):
    g = torch.Generator().manual_seed(n * 7 + t)
    addresses = torch.randn(n, ch, d, generator=g).to(device=device, dtype=dtype)
    queries = torch.randn(t, ch, d, generator=g).to(device=device, dtype=dtype)
    check(addresses, queries)


def test_exact_ties_in_the_scores_go_to_the_earlier_note(device):
    """The vote kernel on scores with exact ties: the first copy wins, also when a copy sits in
    a later vote block at a lower lane (280 -> lane 24 < 40), and a later one at a higher lane."""
    from memexp.kernels.routing.triton import channel_votes_triton

    g = torch.Generator().manual_seed(3)
    scores = torch.rand(3, 300, generator=g) * 0.5
    scores[:, [40, 280, 299]] = 0.75
    scores[2, 12] = 0.75  # channel 2: an even earlier copy
    votes, best = channel_votes_triton(scores.to(device))
    assert best.cpu().tolist() == [40, 40, 12]
    assert votes.cpu()[40].item() == 2 and votes.cpu()[12].item() == 1 and votes.sum().item() == 3


def test_duplicated_addresses_vote_for_a_copy(device):
    """Duplicated addresses score alike (to rounding: the interpreter's dot is BLAS, whose
    result can differ in the last bit with the row's place in a block); each channel votes for
    a copy, the first one wherever the kernel's own scores tie exactly (`check`)."""
    g = torch.Generator().manual_seed(1)
    n, ch, d = 300, 3, 16
    queries = torch.randn(4, ch, d, generator=g)
    addresses = torch.randn(n, ch, d, generator=g) * 0.01  # weak notes
    winner = queries[0] * 3.0  # scale does not change a cosine
    for i in (40, 280, 299):
        addresses[i] = winner
    addresses[7] = 0.0  # a zero address scores 0, not NaN
    votes, best, scores = check(addresses.to(device), queries.to(device))
    assert set(best.tolist()) <= {40, 280, 299}
    exact = scores[:, 40] == scores.amax(1)
    assert torch.all(best[exact] == 40)
    assert votes[[40, 280, 299]].sum().item() == ch and votes.sum().item() == ch
    assert torch.allclose(scores[:, 280], scores[:, 40]) and torch.all(scores[:, 7] == 0)


def test_strided_inputs(device):
    """Addresses and queries that are views with non-unit strides (a channel slice, a
    transposed bank) are read through their strides."""
    g = torch.Generator().manual_seed(2)
    bank = torch.randn(6, 50, 16, generator=g).to(device=device, dtype=torch.bfloat16).transpose(0, 1)  # [50, 6, 16]
    queries = torch.randn(9, 12, 16, generator=g).to(device)[:, ::2]  # [9, 6, 16]
    assert not bank.is_contiguous() and not queries.is_contiguous()
    check(bank, queries)


def test_dispatch_follows_the_kernel_switch(monkeypatch):
    """auto: reference for CPU tensors, the kernel under TRITON_INTERPRET=1; torch: always the
    reference; triton on CPU outside the interpreter: a clear error."""
    calls = []
    fake = types.ModuleType("memexp.kernels.routing.triton")
    fake.route_votes_triton = lambda a, q: calls.append("kernel") or route_votes_reference(a, q)
    monkeypatch.setitem(sys.modules, "memexp.kernels.routing.triton", fake)
    monkeypatch.setattr(dispatch, "has_module", lambda name: True)
    a, q = torch.randn(5, 2, 16), torch.randn(3, 2, 16)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(dispatch, "_mode", "auto")
    route_votes(a, q)
    assert calls == []
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    route_votes(a, q)
    assert calls == ["kernel"]
    monkeypatch.setattr(dispatch, "_mode", "torch")
    route_votes(a, q)
    assert calls == ["kernel"]
    monkeypatch.delenv("TRITON_INTERPRET")
    monkeypatch.setattr(dispatch, "_mode", "triton")
    with pytest.raises(RuntimeError, match="kernels=triton"):
        route_votes(a, q)
