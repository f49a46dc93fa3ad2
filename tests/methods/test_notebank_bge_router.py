"""`method.router=bge` offline, on a tiny random BERT checkpoint this file writes: scores are the
cosines of the encoder's [CLS] vectors (recomputed here with transformers directly), the bank is
encoded once per archive and its time recorded, the question (never a note) is embedded after BGE's
query instruction unless `method.router_query_instruction=""`, NoteBank replays what it picks, and
every load failure is one line naming method.router_model."""

from __future__ import annotations

import pytest
import torch
from helpers.notebank_toy_backbone import FILLER, RARE, WordTokenizer
from test_notebank_router import lexical_archive, question

from memexp.backbones.loading import BackboneLoadError
from memexp.core.schema import ConfigError
from memexp.methods.notebank.bge_router import BGERouter
from memexp.methods.notebank.config import NoteBankConfig
from memexp.methods.notebank.method import NoteBank
from memexp.methods.notebank.router import RouteRequest, build_router


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory):
    """A 2-layer random BERT and a word-piece vocabulary holding the toy words."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = tmp_path_factory.mktemp("tiny_bge")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "?", ","] + FILLER + RARE
    BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}).save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64,
                        initializer_range=1.0)  # large weights: texts get clearly different vectors
    BertModel(config).eval().save_pretrained(folder)
    return folder


def cls_vectors(folder, texts):
    """The [CLS] outputs of `texts`, straight from transformers (the reference for the router)."""
    from transformers import AutoModel, AutoTokenizer

    tok, model = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder).eval()
    with torch.no_grad():
        return torch.stack([model(**tok(t, return_tensors="pt")).last_hidden_state[0, 0] for t in texts])


def ask(router, archive, prompt):
    return router.route(archive, RouteRequest(question(prompt), WordTokenizer()))


@pytest.mark.parametrize("instruction", ["", "what about kite ? "])
def test_scores_are_the_cosines_of_cls_vectors(encoder_dir, instruction):
    archive, tok = lexical_archive(), WordTokenizer()
    router = BGERouter(3, str(encoder_dir), instruction)
    prompt = "what about kite and nine ?"
    selection = ask(router, archive, prompt)
    notes = cls_vectors(encoder_dir, archive.texts(tok))
    query = cls_vectors(encoder_dir, [instruction + prompt])
    expected = torch.nn.functional.cosine_similarity(notes, query, dim=-1)
    assert selection.notes == [0, 1, 2]  # R = 3 of 3 notes, in document order
    assert torch.allclose(torch.tensor(selection.scores), expected, atol=1e-5)
    # R = 1 picks the highest cosine
    assert ask(BGERouter(1, str(encoder_dir), instruction), archive, prompt).notes == [int(expected.argmax())]


def test_the_question_is_embedded_after_bges_query_instruction_and_the_notes_bare(encoder_dir):
    """BGE v1.5's card: "Represent this sentence for searching relevant passages: " before a short
    query, nothing before a passage; `method.router_query_instruction=""` drops it."""
    card = "Represent this sentence for searching relevant passages: "
    tok = WordTokenizer()
    for given, expected in ((None, card), ("", "")):
        archive = lexical_archive()  # a fresh bank: each router encodes it once
        cfg = NoteBankConfig(router="bge", router_model=str(encoder_dir),
                             **({} if given is None else {"router_query_instruction": given}))
        router = build_router("bge", 1, 0, str(encoder_dir), cfg.router_query_instruction)
        seen: list[list[str]] = []

        def recorded(texts, encode=router.encode, seen=seen):
            seen.append(list(texts))
            return encode(texts)

        router.encode = recorded
        selection = ask(router, archive, "zebra ?")
        assert seen == [archive.texts(tok), [expected + "zebra ?"]]  # the notes bare, then the question
        assert selection.stats["router_query_instruction"] == expected


def test_the_instruction_is_read_only_by_an_encoder_router():
    """Another router reads no instruction: its config holds "" (so its run key is what it was
    before the field existed), and a non-string value is one line naming the field."""
    assert NoteBankConfig(router="bm25").router_query_instruction == ""
    assert NoteBankConfig(router="bm25", router_query_instruction="query: ").router_query_instruction == ""
    with pytest.raises(ConfigError, match=r"^method.router_query_instruction=3: give a string") as e:
        NoteBankConfig(router="bge", router_query_instruction=3)
    assert "\n" not in str(e.value)


def test_the_default_instruction_gives_bge_runs_a_new_key_and_others_their_old_one():
    """A run key hashes the config without fields added later at the value that changes nothing:
    a bm25 run (no instruction read) keeps the key it had before `router_query_instruction` existed,
    a bge run at BGE's instruction gets a new one, a bge run with "" keeps its old one."""
    from dataclasses import asdict

    from memexp.run.identity import identity

    def key(cfg: NoteBankConfig, drop: bool) -> dict:
        method = {k: v for k, v in asdict(cfg).items() if not (drop and k == "router_query_instruction")}
        return identity({"method": method})["config"]

    bm25, bge, bare = (NoteBankConfig(router="bm25"), NoteBankConfig(router="bge"),
                       NoteBankConfig(router="bge", router_query_instruction=""))
    assert key(bm25, drop=False) == key(bm25, drop=True)
    assert key(bge, drop=False) != key(bge, drop=True)
    assert key(bare, drop=False) == key(bare, drop=True)


def test_a_question_worded_as_a_note_picks_that_note(encoder_dir):
    archive, tok = lexical_archive(), WordTokenizer()
    router = BGERouter(1, str(encoder_dir), "")
    for i, text in enumerate(archive.texts(tok)):
        selection = ask(router, archive, text)
        assert selection.notes == [i] and abs(selection.scores[0] - 1.0) < 1e-5


def test_the_bank_is_encoded_once_per_archive_and_its_time_recorded(encoder_dir):
    archive = lexical_archive()
    router = build_router("bge", 1, 0, str(encoder_dir), "")
    calls = []
    encode = router.encode
    router.encode = lambda texts: calls.append(len(texts)) or encode(texts)
    first = ask(router, archive, "the river of kite ?")
    second = ask(router, archive, "zebra ?")
    assert calls == [3, 1, 1]  # the three notes once, then each question
    assert first.stats["router_bank_encoding_ms"] == second.stats["router_bank_encoding_ms"] > 0
    assert first.stats["router_query_encoding_ms"] > 0 and first.stats["router_bank_notes"] == 3


def test_notebank_routes_with_bge_and_records_the_encoding_time(encoder_dir):
    from helpers.notebank_toy_backbone import ToyBackbone

    from memexp.core.types import Question

    bb = ToyBackbone(seed=0)
    text = " ".join(["the grass is green and the sky is blue ."] * 30 + ["the code of zebra is seven ."]
                    + ["here we go again and again ."] * 30)
    nb = NoteBank(NoteBankConfig(chunk_size=64, replay_budget=2, router="bge", router_model=str(encoder_dir)))
    nb.prepare(bb)
    memory = nb.read(bb, bb.tokenizer.encode(text))
    texts = memory.extra.texts(bb.tokenizer)
    planted = next(i for i, t in enumerate(texts) if "zebra" in t)
    prompt = texts[planted]  # a question worded exactly as the planted note
    answer = nb.answer(bb, memory, bb.tokenizer.encode(prompt), Question("q", prompt, ["seven"], "string_match", 4))
    assert answer.stats["router"] == "bge" and answer.tokens["probe"] == 0
    assert answer.stats["router_query_instruction"] == "Represent this sentence for searching relevant passages: "
    assert answer.stats["router_bank_notes"] == len(texts) > 2 and answer.stats["router_bank_encoding_ms"] > 0
    assert planted in [e["note"] for e in answer.stats["selected"]] and answer.tokens["replay"] > 0


def test_a_missing_directory_is_a_config_error_before_loading():
    with pytest.raises(ConfigError, match=r"^method.router_model='/no/such/encoder': no such directory") as e:
        NoteBankConfig(router="bge", router_model="/no/such/encoder")
    assert "\n" not in str(e.value)
    NoteBankConfig(router="native", router_model="/no/such/encoder")  # read only by the bge router


def test_offline_hub_id_and_broken_directory_are_one_line_errors(tmp_path):
    with pytest.raises(BackboneLoadError, match=r"^method.router_model='nobody/no-such-encoder': not in the local hub "
                                                r"cache.*method.router_model=/path/to/dir") as e:
        BGERouter(1, "nobody/no-such-encoder").prepare(torch.device("cpu"), torch.float32)
    assert "\n" not in str(e.value)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(BackboneLoadError, match=r"^method.router_model=.*not a loadable encoder") as e:
        BGERouter(1, str(tmp_path)).prepare(torch.device("cpu"), torch.float32)
    assert "\n" not in str(e.value)
