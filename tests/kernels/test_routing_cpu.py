"""The tiled CPU router equals `route_votes_reference`: scores to fp32 rounding, first-argmax
ties across tile boundaries, the vote histogram, and the dispatch of CPU tensors to it."""

import pytest
import torch

from memexp.kernels import dispatch, routing
from memexp.kernels.routing.cpu import _tile_shape, route_votes_cpu
from memexp.kernels.routing.reference import route_votes_reference


def rel_rms(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).pow(2).mean().sqrt() / b.pow(2).mean().sqrt().clamp_min(1e-12)).item()


def tile_bytes(notes: int, d: int, t: int) -> int:
    """A budget that makes tiles of exactly `notes` notes of one channel."""
    return notes * 4 * (d + t)


def check(addresses: torch.Tensor, queries: torch.Tensor, **kwargs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    votes, best, scores = route_votes_cpu(addresses, queries, **kwargs)
    ref_votes, ref_best, ref_scores = route_votes_reference(addresses, queries)
    assert votes.dtype == best.dtype == torch.int64 and scores.dtype == torch.float32
    assert scores.shape == ref_scores.shape and votes.shape == ref_votes.shape and best.shape == ref_best.shape
    assert rel_rms(scores, ref_scores) < 1e-6
    # A channel must pick the reference's note unless its two best notes are within rounding.
    top2 = ref_scores.topk(min(2, ref_scores.shape[1]), dim=1).values
    clear = (top2[:, 0] - top2[:, -1] > 1e-6) | (ref_scores.shape[1] == 1)
    assert torch.equal(best[clear], ref_best[clear])
    first = torch.where(scores == scores.amax(1, keepdim=True), torch.arange(scores.shape[1]), scores.shape[1]).amin(1)
    assert torch.equal(best, first)  # ties in its own scores go to the lowest index
    assert torch.equal(votes, torch.bincount(best, minlength=addresses.shape[0]))
    return votes, best, scores


SHAPES = [  # (notes, channels, question tokens, d, dtype, notes per tile or None for the default)
    (1, 3, 1, 16, torch.float32, None),  # one note, one question token
    (1, 5, 7, 16, torch.bfloat16, 1),  # one note per tile
    (100, 4, 5, 16, torch.bfloat16, 32),  # notes not a multiple of the tile, last tile of 4
    (70, 2, 1, 256, torch.bfloat16, 16),  # identity addresses (d_rho = d_k = 256), one question token
    (300, 2, 3, 10, torch.float32, 128),  # d not a power of two
    (4096, 24, 64, 16, torch.bfloat16, None),  # the default tiles: several channels per tile
]


@pytest.mark.parametrize("n,ch,t,d,dtype,notes_per_tile", SHAPES)
def test_equals_reference(n, ch, t, d, dtype, notes_per_tile):
    g = torch.Generator().manual_seed(n * 7 + t)
    addresses = torch.randn(n, ch, d, generator=g).to(dtype)
    queries = torch.randn(t, ch, d, generator=g).to(dtype)
    kwargs = {} if notes_per_tile is None else {"tile_bytes": tile_bytes(notes_per_tile, d, t)}
    check(addresses, queries, **kwargs)


@pytest.mark.parametrize("notes_per_tile", [64, 1000])
def test_ties_go_to_the_earlier_note(notes_per_tile):
    """Duplicated addresses score exactly alike; every channel must vote for the first copy,
    also when later copies sit in later tiles at a lower offset (100 -> 36 < 40 with 64-note
    tiles) and in a partial last tile (299)."""
    g = torch.Generator().manual_seed(1)
    n, ch, d, t = 300, 3, 16, 4
    queries = torch.randn(t, ch, d, generator=g)
    addresses = torch.randn(n, ch, d, generator=g) * 0.01  # weak notes
    winner = queries[0] * 3.0  # scale does not change a cosine
    for i in (40, 100, 280, 299):
        addresses[i] = winner
    addresses[7] = 0.0  # a zero address scores 0, not NaN
    votes, best, scores = check(addresses, queries, tile_bytes=tile_bytes(notes_per_tile, d, t))
    assert best.tolist() == [40] * ch
    assert votes[40].item() == ch and votes.sum().item() == ch
    for i in (100, 280, 299):
        assert torch.equal(scores[:, i], scores[:, 40])
    assert torch.all(scores[:, 7] == 0)


def test_identical_bank_votes_for_the_first_note():
    """Every note alike, over tiles of two channels: all votes go to note 0."""
    g = torch.Generator().manual_seed(3)
    n, ch, d, t = 1000, 5, 16, 8
    addresses = torch.randn(1, ch, d, generator=g).expand(n, ch, d).to(torch.bfloat16)
    queries = torch.randn(t, ch, d, generator=g)
    votes, best, scores = check(addresses, queries, tile_bytes=tile_bytes(n, d, t) * 2)
    assert best.tolist() == [0] * ch and votes[0].item() == ch
    assert torch.equal(scores, scores[:, :1].expand_as(scores))


def test_zero_vectors():
    """Zero addresses and zero question positions score 0; an all-zero bank votes for note 0."""
    g = torch.Generator().manual_seed(4)
    n, ch, d, t = 50, 3, 16, 6
    queries = torch.randn(t, ch, d, generator=g)
    queries[2] = 0.0
    addresses = torch.randn(n, ch, d, generator=g)
    addresses[5, 1] = 0.0
    _, _, scores = check(addresses, queries, tile_bytes=tile_bytes(16, d, t))
    assert scores[1, 5].item() == 0.0
    votes, best, scores = check(torch.zeros(n, ch, d), queries)
    assert torch.all(scores == 0) and best.tolist() == [0] * ch and votes[0].item() == ch
    _, _, scores = check(addresses, torch.zeros(t, ch, d))
    assert torch.all(scores == 0)


def test_strided_inputs():
    """A transposed bank and a channel slice of the question are read through their strides."""
    g = torch.Generator().manual_seed(2)
    bank = torch.randn(6, 50, 16, generator=g).to(torch.bfloat16).transpose(0, 1)  # [50, 6, 16]
    queries = torch.randn(9, 12, 16, generator=g)[:, ::2]  # [9, 6, 16]
    assert not bank.is_contiguous() and not queries.is_contiguous()
    check(bank, queries, tile_bytes=tile_bytes(20, 16, 9))


def test_tile_shape():
    """Whole channels per tile while a channel fits the budget, else note blocks of one channel."""
    assert _tile_shape(4096, 192, 16, 64, 8 * 4096 * 4 * 80) == (4096, 8)
    assert _tile_shape(4096, 3, 16, 64, 8 * 4096 * 4 * 80) == (4096, 3)
    assert _tile_shape(4096, 192, 16, 64, 1000 * 4 * 80) == (1000, 1)
    assert _tile_shape(5, 2, 16, 64, 1) == (1, 1)


def test_bad_shapes():
    with pytest.raises(ValueError, match="disagree"):
        route_votes_cpu(torch.randn(4, 2, 16), torch.randn(3, 2, 8))
    with pytest.raises(ValueError, match="at least one"):
        route_votes_cpu(torch.randn(0, 2, 16), torch.randn(3, 2, 16))


def test_keeps_the_callers_threads():
    before = torch.get_num_threads()
    route_votes_cpu(torch.randn(30, 2, 16), torch.randn(3, 2, 16))
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("mode", ["auto", "torch"])
def test_cpu_tensors_take_the_tiled_path(monkeypatch, mode):
    """Outside Triton's interpreter, CPU tensors go to the tiled path in both modes that
    allow a fallback."""
    calls = []
    monkeypatch.setattr(routing, "route_votes_cpu", lambda a, q: calls.append("cpu") or route_votes_reference(a, q))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(dispatch, "_mode", mode)
    routing.route_votes(torch.randn(5, 2, 16), torch.randn(3, 2, 16))
    assert calls == ["cpu"]
