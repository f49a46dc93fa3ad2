"""The post-training text of each stage, read from tiny local copies in each source's layout: what
is supervised, how sequences are packed, truncated and mixed (the authors' train_datasets.py and
sft_kvwrite_quality_mc.py), checked by decoding the byte tokenizer's ids."""

from __future__ import annotations

import itertools

import pytest

from memexp.backbones import load_backbone
from memexp.cli.train import load_recipe
from memexp.training.titan_llama.data import IGNORE, Formatter, gold_sft, pretrain_mix, quality_sft
from memexp.training.titan_llama.train import micro_batches
from tests.training.titan_data import FINEWEB, LONGALIGN, QUALITY, write_sources

EOS = 257  # the byte tokenizer's </s>
BOS = 256


@pytest.fixture(scope="module")
def fmt():
    return Formatter(load_backbone("tiny_llama_random"))


def recipe(tmp_path, *extra):
    paths = write_sources(tmp_path / "data")
    r, _ = load_recipe(["recipe=titan_llama", f"output={tmp_path / 'run'}", "sequence_length=128", "shuffle_buffer=1",
                        *(f"{k}={v}" for k, v in paths.items()), *extra])
    return r


def supervised(seq) -> list[int]:
    return [t for t, y in zip(seq.ids, seq.labels) if y != IGNORE]


def test_pretrain_blocks_are_dense_alternate_sources_and_join_documents_with_one_eos(tmp_path, fmt):
    r = recipe(tmp_path, "data_seed=3")  # odd: FineWeb first, as the code
    blocks = list(itertools.islice(pretrain_mix(r, fmt), 6))
    assert all(len(b.ids) == 128 and b.labels == b.ids for b in blocks)
    web = bytes(t for b in blocks[0::2] for t in b.ids if t < 256).decode()
    chat = bytes(t for b in blocks[1::2] for t in b.ids if t < 256).decode()
    assert web.startswith("Document ") and "Assistant:" not in web  # shuffle_buffer=1 keeps file order
    doc = list(FINEWEB[0].encode())
    assert blocks[0].ids[:len(doc)] == doc and blocks[0].ids[len(doc)] == EOS
    assert blocks[0].ids[len(doc) + 1:len(doc) + 12] == list(FINEWEB[1].encode()[:11])
    assert chat.startswith("User: Summarise text number 0") and "Assistant: Summary 0." in chat
    even = list(itertools.islice(pretrain_mix(recipe(tmp_path, "data_seed=4"), fmt), 1))[0]
    assert bytes(t for t in even.ids if t < 256).decode().startswith("User: ")


def test_gold_sft_supervises_only_the_answer_and_mixes_the_stated_counts(tmp_path, fmt):
    r = recipe(tmp_path, "stages.1.longalign_examples=5", "stages.1.loongrl_examples=3")
    seqs = list(itertools.islice(gold_sft(r, r.stages[1], fmt), 8))  # one pass of the schedule
    answers = [bytes(t for t in supervised(s) if t < 256).decode() for s in seqs]
    loong = [a for a in answers if a.startswith("City")]
    assert sorted(loong) == ["City0", "City1", "City2"]  # the first gold answer, no EOS, of the first 3 rows
    chats = [a for a in answers if not a.startswith("City")]
    assert len(chats) == 5 and all(a.startswith(" Summary ") and a.endswith(".") for a in chats)
    assert all(supervised(s)[-1] == EOS for s in seqs if not bytes(t for t in supervised(s) if t < 256)
               .decode().startswith("City"))


def test_a_long_loongrl_prompt_keeps_bos_and_its_tail(tmp_path, fmt):
    r = recipe(tmp_path, "sequence_length=64", "stages.1.longalign_examples=0", "stages.1.loongrl_examples=1")
    seq = next(gold_sft(r, r.stages[1], fmt))
    assert len(seq.ids) == 64 and seq.ids[0] == BOS
    text = bytes(t for t in seq.ids if t < 256).decode()
    assert text.endswith("Which city?\nAssistant:City0") and "Context 0" not in text


def test_quality_prompt_letter_target_and_three_passes(tmp_path, fmt):
    questions = sum(len(a["questions"]) for a in QUALITY)
    r = recipe(tmp_path, "sequence_length=512", f"stages.2.quality_examples={3 * questions}")
    seqs = list(quality_sft(r, r.stages[2], fmt))
    assert len(seqs) == 3 * questions and seqs[:questions] == seqs[questions:2 * questions]
    by_prompt = {}
    for s in seqs[:questions]:
        text = bytes(t for t in s.ids if t < 256).decode()
        by_prompt[text.split("\n\nQuestion: ")[1].split("?")[0]] = bytes(supervised(s)).decode()
        assert "\nChoices:\nA. one\nB. two\nC. three\nD. four\nAnswer:" in text
    want = {f"Q{a}.{j}": " " + "ABCD"[(a + j) % 4] for a in range(3) for j in range(2)}  # gold_label is 1-based
    assert by_prompt == want


def test_micro_batches_pad_to_whole_segments_and_shard_by_rank(tmp_path, fmt):
    r = recipe(tmp_path, "sequence_length=512", "stages.2.quality_examples=6", "stages.2.micro_batch_size=2")
    seqs = list(quality_sft(r, r.stages[2], fmt))
    batches = list(micro_batches(iter(seqs), r.stages[2], r, EOS, segment=16))
    longest = max(len(s.ids) for s in seqs[:2])
    ids, labels = batches[0]
    assert ids.shape == (2, -(-longest // 16) * 16) and len(batches) == 3
    short = min(range(2), key=lambda b: len(seqs[b].ids))
    assert (ids[short, len(seqs[short].ids):] == EOS).all() and (labels[short, len(seqs[short].ids):] == IGNORE).all()
    rank1 = list(micro_batches(iter(seqs), r.stages[2], r, EOS, segment=16, rank=1, world=2))
    assert len(rank1) == 1 and rank1[0][0][0, :len(seqs[1].ids)].tolist() == seqs[1].ids


def test_longalign_prompt_truncation_keeps_the_answer_whole(fmt):
    messages = LONGALIGN[0]["messages"]
    prompt = len("User: " + messages[0]["content"] + "\nAssistant:") + 1  # + BOS
    answer = len(" Summary 0.") + 1  # + EOS
    seq = fmt.sft(messages, prompt + answer - 3, causal=False)  # 3 tokens too long
    assert len(seq.ids) == prompt + answer - 3 and bytes(t for t in supervised(seq) if t < 256).decode() == " Summary 0."
    assert seq.ids[0] != BOS and bytes(seq.ids[:3]).decode() == "er:"  # lost its first 3 tokens: BOS, "U", "s"
    assert fmt.sft(messages, prompt, causal=False) is None  # a prompt of max_len or more is skipped, as the code
    causal = fmt.sft(messages, 1000, causal=True)
    assert causal.labels == causal.ids
