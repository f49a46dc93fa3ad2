"""NoteBank's writer: distinctiveness and query reduction, the tail, addresses, sentence
boundaries, and which chunks write notes."""

import math

import pytest
import torch
from helpers.notebank_toy_backbone import ToyBackbone, WordTokenizer

from memexp.backbones.base import Channel
from memexp.methods.notebank.addresses import AddressCompactor, ChannelLayout
from memexp.methods.notebank.config import NoteBankConfig
from memexp.methods.notebank.features import ChunkFeatures, QuestionQueries
from memexp.methods.notebank.method import NoteBank
from memexp.methods.notebank.sentences import SentenceEndTable, ends_sentence, sentence_ids
from memexp.methods.notebank.writer import NoteWriter, representatives

E1, E2 = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])


def layout_of(layers_heads: list[tuple[int, int]], d_k: int = 2) -> ChannelLayout:
    return ChannelLayout([Channel(layer, head, d_k) for layer, head in layers_heads], torch.device("cpu"))


def test_distinctiveness_per_channel_and_split_chunks():
    layout = layout_of([(0, 0), (0, 1), (3, 0)])
    compactor = AddressCompactor(layout, None, 0, torch.device("cpu"))
    features = ChunkFeatures(layout, compactor, 4, torch.device("cpu"))
    layer0_keys = torch.stack([torch.stack([E1, E1]), torch.stack([E1, E2]), torch.stack([E1, E1]),
                               torch.stack([E2, E2])])  # [T=4, H=2, 2]
    layer3_keys = torch.stack([E1, E1, E2, E2])[:, None] * 5.0  # not unit: normalised by the measure
    queries0 = torch.arange(16.0).reshape(4, 2, 2)
    features(0, 0, layer0_keys, queries0)
    features(3, 0, layer3_keys[:2], torch.zeros(2, 1, 2))  # layer 3 arrives in two pieces
    assert not features.complete()
    features(3, 2, layer3_keys[2:], torch.ones(2, 1, 2))
    assert features.complete()
    # head 0: e1 e1 e1 e2 -> mean direction (3, 1)/sqrt(10)
    head0 = [1 - 3 / math.sqrt(10)] * 3 + [1 - 1 / math.sqrt(10)]
    # head 1: e1 e2 e1 e2 and layer 3: e1 e1 e2 e2 -> mean direction (1, 1)/sqrt(2)
    even = [1 - 1 / math.sqrt(2)] * 4
    expected = torch.tensor([head0, even, even]).T
    torch.testing.assert_close(features.scores, expected)
    torch.testing.assert_close(features.queries[:, :2], queries0)
    torch.testing.assert_close(features.queries[:, 2, :], torch.tensor([[0.0, 0], [0, 0], [1, 1], [1, 1]]))


def test_compaction_is_a_fixed_seeded_coordinate_selection_shared_with_questions():
    layout = layout_of([(0, 0), (0, 1), (1, 0)], d_k=8)
    a = AddressCompactor(layout, 3, seed=7, device=torch.device("cpu"))
    b = AddressCompactor(layout, 3, seed=7, device=torch.device("cpu"))
    assert torch.equal(a.index, b.index)
    assert all(len(set(row.tolist())) == 3 for row in a.index)  # distinct coordinates per channel
    queries = torch.randn(5, 2, 8)
    compact = a(0, queries)
    assert compact.shape == (5, 2, 3)
    for h in range(2):
        torch.testing.assert_close(compact[:, h], queries[:, h, a.index[h]])
    probe = QuestionQueries(layout, a, 5, torch.device("cpu"))
    probe(0, 0, queries, queries)
    assert probe.queries.dtype == torch.float32
    torch.testing.assert_close(probe.queries[:, :2], compact.float())
    with pytest.raises(ValueError, match="address_dim"):
        AddressCompactor(layout, 9, seed=0, device=torch.device("cpu"))


def test_representative_is_each_channels_most_distinctive_position_first_on_ties():
    scores = torch.tensor([[0.1, 0.9, 0.0],
                           [0.5, 0.9, 0.0],
                           [0.5, 0.2, 0.0]])  # [n=3 positions, J=3 channels]
    assert representatives(scores).tolist() == [1, 0, 0]


def test_sentence_end_table_decodes_each_id_once():
    tok = WordTokenizer()
    decoded = []
    original = tok.decode
    tok.decode = lambda ids: decoded.append(list(ids)) or original(ids)
    table = SentenceEndTable(tok)
    ids = torch.tensor(tok.encode("the sky . is blue ? here \n the sky"))
    assert table(ids).tolist() == [False, False, True, False, False, True, False, True, False, False]
    assert table(ids).tolist() == table(ids[:3]).tolist() + table(ids[3:]).tolist()
    assert len(decoded) == len(set(ids.tolist()))
    assert sentence_ids(table(ids)).tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 3, 3]


@pytest.mark.parametrize("text, ends", [("end.", True), ('no."', True), ("why?)", True), ("\n", True),
                                        ("a\nb", True), ("3", False), (" word", False), (",", False)])
def test_ends_sentence(text, ends):
    assert ends_sentence(text) is ends


def writer_for(ids: list[int], **cfg) -> NoteWriter:
    config = NoteBankConfig(**cfg)
    tok = WordTokenizer()
    return NoteWriter(config, torch.tensor(ids), SentenceEndTable(tok), channels=2, address_dim=1,
                      device=torch.device("cpu"))


def two_token_sentences(n_tokens: int) -> list[int]:
    tok = WordTokenizer()
    return tok.encode("green ." * (n_tokens // 2))


def positional_queries(start: int, length: int) -> torch.Tensor:
    """[length, 2, 1] queries whose value is the token's context position (channel 1: negated)."""
    pos = torch.arange(start, start + length, dtype=torch.float32)
    return torch.stack([pos, -pos], dim=1)[..., None]


def test_tail_extends_the_region_with_scores_and_queries_from_their_own_chunk():
    ids = two_token_sentences(32)
    writer = writer_for(ids, chunk_size=16, tail=4, window=2, span_budget=2, write_budget=1)
    first = torch.zeros(16, 2)
    first[13, 0] = first[12, 1] = 1.0  # inside the last 4 tokens of chunk 0
    assert writer.add_chunk(0, first, positional_queries(0, 16)) == [(12, 14)]
    # chunk 1 scores nothing: its region's best window lies in the tail, scored in chunk 0
    assert writer.add_chunk(1, torch.zeros(16, 2), positional_queries(16, 16)) == [(12, 14)]
    archive = writer.archive()
    assert archive.spans.tolist() == [[0, 12, 14], [1, 12, 14]]
    # per channel, the query at that channel's most distinctive key: 13 for channel 0, 12 for channel 1
    assert archive.addresses[1, :, 0].float().tolist() == [13.0, -12.0]


def test_tail_reaches_back_only_tail_tokens():
    ids = two_token_sentences(32)
    writer = writer_for(ids, chunk_size=16, tail=4, window=2, span_budget=2, write_budget=1)
    first = torch.zeros(16, 2)
    first[10] = 5.0  # outside the 4-token tail
    writer.add_chunk(0, first, positional_queries(0, 16))
    second = torch.zeros(16, 2)
    second[8] = 1.0
    assert writer.add_chunk(1, second, positional_queries(16, 16)) == [(24, 26)]
    no_tail = writer_for(ids, chunk_size=16, tail=0, window=2, span_budget=2, write_budget=1)
    no_tail.add_chunk(0, first, positional_queries(0, 16))
    assert no_tail.add_chunk(1, torch.zeros(16, 2), positional_queries(16, 16)) == [(16, 18)]


def test_context_shorter_than_a_chunk_leaves_the_archive_empty():
    bb = ToyBackbone()
    nb = NoteBank(NoteBankConfig(chunk_size=64))
    ids = bb.tokenizer.encode("the sky is blue . " * 20)[:63]
    memory = nb.read(bb, ids)
    assert memory.stats["notes"] == 0
    assert memory.stats["archive_bytes"] == {"addresses_device": 0, "host": 0}
    assert bb.calls == [(63, False)]
    assert memory.state.position == 63


def test_final_incomplete_chunk_is_read_but_writes_nothing():
    bb = ToyBackbone()
    nb = NoteBank(NoteBankConfig(chunk_size=64, write_budget=2))
    ids = bb.tokenizer.encode("the grass is green . here we go zebra again ." * 15)[:160]
    memory = nb.read(bb, ids)
    archive = memory.extra
    assert bb.calls == [(64, True), (64, True), (32, False)]
    assert memory.state.position == 160
    assert 1 <= len(archive) <= 2 * (160 // 64)
    assert int(archive.spans[:, 2].max()) <= 128
    assert set(archive.spans[:, 0].tolist()) <= {0, 1}


def test_write_tail_writes_the_final_incomplete_chunk_as_a_last_shorter_chunk():
    """method.write_tail: the same reading, plus notes from the tail (measured against its own mean)."""
    bb = ToyBackbone()
    ids = bb.tokenizer.encode("the grass is green . here we go zebra again ." * 15)[:160]
    plain = NoteBank(NoteBankConfig(chunk_size=64, write_budget=2)).read(bb, ids).extra
    bb.calls.clear()
    memory = NoteBank(NoteBankConfig(chunk_size=64, write_budget=2, write_tail=True)).read(bb, ids)
    archive = memory.extra
    assert bb.calls == [(64, True), (64, True), (32, True)]  # the tail's keys and queries observed
    assert memory.state.position == 160
    assert archive.spans[:len(plain)].tolist() == plain.spans.tolist()  # the complete chunks' notes unchanged
    tail_notes = archive.spans[len(plain):].tolist()
    assert tail_notes and all(chunk == 2 and end > 128 for chunk, _, end in tail_notes)
