"""scripts/probe/notebank_representative_tokens.py: the score a key token's query would get as a note's
address is Eq. 5's (max cosine over question positions, per channel), and the key is found
where it occurs, not before."""

import torch
from script_module import load_script

from memexp.kernels.routing.reference import route_votes_reference


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


def test_needle_parts_split_a_needle_sentence_into_template_key_and_value():
    needle_parts = load_script("notebank_representative_tokens").needle_parts
    # ids: haystack 9 9, then "One of the magic for" (1 2 3 4 5), key (6 7 8), "is" ":" (10 11),
    # the value with its space (12 13 14), "." (15), haystack 9
    ids = [9, 9, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 9]
    parts = needle_parts(ids, key_at=7, key_len=3, value_ids=[12, 13, 14], first={1})
    assert parts == {"template": [2, 3, 4, 5, 6, 10, 11, 15], "key": [7, 8, 9], "value": [12, 13, 14]}
    # a sentence whose first word is not found within reach gives nothing rather than a guess
    assert needle_parts(ids, key_at=7, key_len=3, value_ids=[12, 13, 14], first={99}) == {}
    # a needle cut by the end of the context keeps its parts inside it
    assert needle_parts(ids[:14], key_at=7, key_len=3, value_ids=[12, 13], first={1})["value"] == [12, 13]


def test_chunk_percentiles_rank_within_the_positions_own_chunk():
    chunk_percentiles = load_script("notebank_representative_tokens").chunk_percentiles
    # two chunks of 4 tokens, two channels; channel 1 is channel 0 reversed within each chunk
    c0 = torch.tensor([0.1, 0.4, 0.2, 0.3, 5.0, 6.0, 7.0, 8.0])
    scores = torch.stack([c0, torch.cat([c0[:4].flip(0), c0[4:].flip(0)])], dim=1)
    ranks = chunk_percentiles(scores, [1, 4], chunk_size=4)
    # position 1 (0.4) beats 3 of its chunk's 4 scores on channel 0; on channel 1 it holds 0.2: 1 of 4.
    # position 4 (5.0) is its chunk's lowest on channel 0, and holds 8.0, the highest, on channel 1
    assert torch.allclose(ranks, torch.tensor([[75.0, 25.0], [0.0, 75.0]]))
