"""NoteBank routers on hand-made archives: votes, top-R, ties, document order, budgets, and
the random / BM25 / oracle alternatives."""

import torch
from helpers.notebank_toy_backbone import WordTokenizer

from memexp.core.types import Question
from memexp.methods.notebank.archive import ArchiveBuilder
from memexp.methods.notebank.router import (
    BM25Router,
    EmbeddingRouter,
    NativeRouter,
    OracleRouter,
    RandomRouter,
    RouteRequest,
    build_router,
    top_r,
)

E1, E2, E3 = torch.eye(3)


def archive_with(addresses: list[torch.Tensor], starts: list[int], length: int = 2, ids: list[int] | None = None):
    """Notes of `length` tokens at `starts` (written in list order) with [Ch, d] addresses."""
    context = torch.tensor(ids if ids is not None else list(range(1000)))
    builder = ArchiveBuilder(context, addresses[0].shape[0], addresses[0].shape[1], torch.device("cpu"))
    for k, (a, s) in enumerate(zip(addresses, starts)):
        builder.add(k, s, s + length, a)
    return builder.build()


def question(prompt: str = "q", references=(), qid: str = "q0") -> Question:
    return Question(qid, prompt, list(references), "string_match", 4)


def route(router, archive, queries, q=None):
    return router.route(archive, RouteRequest(q or question(), WordTokenizer(), queries))


def test_top_r_breaks_ties_to_the_earlier_note():
    assert top_r(torch.tensor([1, 3, 3, 0, 3]), 2) == [1, 2]
    assert top_r(torch.tensor([0, 0, 0]), 5) == [0, 1, 2]


def test_each_channel_votes_for_its_max_cosine_note():
    # 3 channels, d = 3. Note addresses are unnormalised: only their direction counts.
    notes = [
        torch.stack([E1, E1, E3]) * 4.0,  # note 0
        torch.stack([E2, E3, E1]) * 0.5,  # note 1
        torch.stack([E3, E2, E1]) * 2.0,  # note 2
    ]
    archive = archive_with(notes, starts=[300, 100, 200])
    # question position 0 looks like e2 on every channel, position 1 like e1 on channel 2
    queries = torch.stack([torch.stack([E2, E2, E2]), torch.stack([E3, E3, E1])])
    # channel 0: note 1 (e2) or note 2 (e3): both cosine 1 -> earlier, note 1
    # channel 1: note 2 (e2) and note 1 (e3) tie at 1 -> note 1; channel 2: notes 1, 2 (e1) -> note 1
    selection = route(NativeRouter(1), archive, queries.to(torch.bfloat16))
    assert selection.notes == [1] and selection.scores == [3.0]


def test_top_r_votes_replayed_in_document_order():
    notes = [torch.stack([E1, E1, E1]), torch.stack([E2, E2, E2]), torch.stack([E3, E3, E3])]
    archive = archive_with(notes, starts=[500, 40, 300])
    # channels 0, 1 want note 2 (e3); channel 2 wants note 0 (e1)
    queries = torch.stack([E3, E3, E1])[None]
    selection = route(NativeRouter(2), archive, queries)
    assert selection.notes == [2, 0]  # note 2 starts at 300, note 0 at 500
    assert selection.scores == [2.0, 1.0]
    # R larger than the archive: every note, in document order
    assert route(NativeRouter(10), archive, queries).notes == [1, 2, 0]


def test_vote_ties_go_to_the_earlier_written_note():
    notes = [torch.stack([E1, E2]), torch.stack([E2, E1]), torch.stack([E3, E3])]
    archive = archive_with(notes, starts=[90, 10, 50], length=1)
    queries = torch.stack([E2, E2])[None]  # channel 0 -> note 1, channel 1 -> note 0: one vote each
    assert route(NativeRouter(1), archive, queries).notes == [0]


def test_random_router_is_seeded_per_question_and_in_document_order():
    notes = [torch.stack([E1])] * 6
    archive = archive_with(notes, starts=[60, 50, 40, 30, 20, 10])
    router = RandomRouter(3, seed=0)
    first = route(router, archive, None, question(qid="a"))
    assert len(first.notes) == 3 and len(set(first.notes)) == 3
    assert first.notes == sorted(first.notes, reverse=True)  # later-written notes start earlier
    route(router, archive, None, question(qid="b"))
    assert route(router, archive, None, question(qid="a")).notes == first.notes
    draws = {tuple(route(RandomRouter(3, seed=s), archive, None, question(qid="a")).notes) for s in range(8)}
    assert len(draws) > 1
    assert sorted(route(RandomRouter(10, seed=0), archive, None, question()).notes) == list(range(6))


def lexical_archive():
    tok = WordTokenizer()
    text = "the code of zebra is seven . the river of kite is nine . the grass is green ."
    ids = tok.encode(text)
    spans = [(0, 7), (7, 14), (14, 19)]
    builder = ArchiveBuilder(torch.tensor(ids), 1, 1, torch.device("cpu"))
    for k, (s, e) in enumerate(spans):
        builder.add(k, s, e, torch.ones(1, 1))
    return builder.build()


def test_bm25_router_matches_question_words():
    archive = lexical_archive()
    selection = route(BM25Router(1), archive, None, question("tell me about kite ?"))
    assert selection.notes == [1] and selection.scores[0] > 0
    both = route(BM25Router(2), archive, None, question("zebra or kite ?"))
    assert both.notes == [0, 1]
    # no query term in any note: every score ties at 0 and the earliest notes win
    assert route(BM25Router(1), archive, None, question("purple giraffe")).notes == [0]


def test_embedding_router_ranks_notes_by_mean_input_embedding_cosine():
    """One-hot embeddings make the cosine countable: "tell me about kite ?" (5 tokens) shares
    only "kite" with note 1 (7 tokens), cosine (1/35) / (sqrt(7)/7 * sqrt(5)/5) = 1/sqrt(35);
    the other notes score 0. Note vectors are computed once per archive."""
    archive, tok = lexical_archive(), WordTokenizer()
    calls = []

    def embed(ids):
        calls.append(len(ids))
        return torch.eye(len(tok.vocab), dtype=torch.float64)[ids]

    def ask(prompt, r):
        return EmbeddingRouter(r).route(archive, RouteRequest(question(prompt), tok, None, tok.encode(prompt), embed))

    selection = ask("tell me about kite ?", 1)
    assert selection.notes == [1] and abs(selection.scores[0] - 35 ** -0.5) < 1e-6
    assert ask("zebra kite ?", 2).notes == [0, 1]
    assert ask("purple giraffe", 2).notes == [0, 1]  # all scores 0: the earliest notes
    assert calls == [19, 5, 3, 2]  # the archive's 19 note tokens once, then each question


def test_oracle_router_picks_notes_holding_a_reference():
    archive = lexical_archive()
    assert route(OracleRouter(2), archive, None, question(references=["nine"])).notes == [1]
    assert route(OracleRouter(1), archive, None, question(references=["Seven", "nine"])).notes == [0]
    assert route(OracleRouter(1), archive, None, question(references=["green", "grass is"])).notes == [2]
    assert route(OracleRouter(2), archive, None, question(references=["purple"])).notes == []


def test_build_router_by_name():
    assert isinstance(build_router("native", 2, 0), NativeRouter)
    assert isinstance(build_router("random", 2, 0), RandomRouter)
    assert isinstance(build_router("bm25", 2, 0), BM25Router)
    assert isinstance(build_router("embedding", 2, 0), EmbeddingRouter)
    assert isinstance(build_router("oracle", 2, 0), OracleRouter)
