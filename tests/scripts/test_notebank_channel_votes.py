"""scripts/probe/notebank_channel_votes.py: its per-channel votes are the native router's (the kernel
reference), and "the top-R holds a right note" is counted as the router would replay."""

import torch
from script_module import load_script

from memexp.kernels.routing.reference import route_votes_reference


def test_channel_votes_are_the_routers_on_random_notes():
    votes_hit = load_script("notebank_channel_votes").votes_hit
    g = torch.Generator().manual_seed(3)
    addresses, queries = torch.randn(9, 5, 8, generator=g), torch.randn(4, 5, 8, generator=g)
    _, best, _ = route_votes_reference(addresses, queries)
    right = torch.zeros(9, dtype=torch.bool)
    right[best[2]] = True
    hits, _ = votes_hit(addresses, queries, right, 2)
    assert hits.tolist() == (best == best[2]).tolist()


def test_top_r_follows_the_vote_count_and_ties_go_to_the_earlier_note():
    votes_hit = load_script("notebank_channel_votes").votes_hit
    e = torch.eye(4)
    # three notes, one channel each of three; every channel's question query equals one note's address
    addresses = torch.stack([torch.stack([e[0], e[0], e[1]]), torch.stack([e[1], e[1], e[0]]),
                             torch.stack([e[2], e[2], e[2]])])  # [N=3, J=3, d=4]
    queries = torch.stack([e[1], e[1], e[2]])[None]  # channels 0, 1 -> note 1; channel 2 -> note 2
    right = torch.tensor([False, False, True])
    assert votes_hit(addresses, queries, right, 1)[1] is False  # note 1 has 2 votes, note 2 has 1
    assert votes_hit(addresses, queries, right, 2)[1] is True
    tie = torch.stack([e[1], e[3], e[2]])[None]  # channel 1 matches no note: all cosines 0, its vote to note 0
    hits, found = votes_hit(addresses, tie, torch.tensor([True, False, False]), 1)
    assert hits.tolist() == [False, True, False] and found is True  # 1 vote each: note 0, the earlier, wins


def test_overrides_may_follow_the_options():
    votes = load_script("notebank_channel_votes")
    args = votes.parse(["bench.seed=8", "--draws", "0", "method.layers=[0]", "--matches"])
    assert args.overrides == ["bench.seed=8", "method.layers=[0]"] and args.draws == 0 and args.matches
