"""scripts/notebank_representative_tokens.py: the score a key token's query would get as a note's
address is Eq. 5's (max cosine over question positions, per channel), and the key is found
where it occurs, not before."""

import torch
from script_module import load_script

from kernels.routing.reference import route_votes_reference


def test_best_match_is_the_score_the_best_key_token_would_get_as_an_address():
    best_match = load_script("notebank_representative_tokens").best_match
    g = torch.Generator().manual_seed(5)
    key, question = torch.randn(3, 4, 8, generator=g), torch.randn(6, 4, 8, generator=g)
    # each key token as the address of its own note: the router's scores, best over the notes
    _, _, scores = route_votes_reference(key, question)  # [J, P]
    assert torch.allclose(best_match(key, question), scores.amax(dim=1), atol=1e-6)


def test_best_match_by_hand():
    best_match = load_script("notebank_representative_tokens").best_match
    e = torch.eye(2)
    key = torch.stack([torch.stack([e[0], e[0]]), torch.stack([e[1], -e[1]])])  # [P=2, J=2, d=2]
    question = torch.stack([torch.stack([e[1], e[1] + e[0]])])  # [Tq=1, J=2, d=2]
    # channel 0: token 1's query equals the question's (cos 1); channel 1: token 0's e0 vs e0+e1 (cos 1/sqrt 2)
    assert torch.allclose(best_match(key, question), torch.tensor([1.0, 2**-0.5]))


def test_find_starts_where_told():
    find = load_script("notebank_representative_tokens").find
    ids = [5, 1, 2, 7, 1, 2, 9]
    assert find(ids, [1, 2], 0) == 1
    assert find(ids, [1, 2], 2) == 4
    assert find(ids, [1, 2], 5) is None
