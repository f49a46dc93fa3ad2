"""NoteBank's answer stats carry the text of every replayed note, so the per-question table shows
what the model re-read: the text of the context span the note covers, decoded from the context's
own ids at the span's positions (not from the archive)."""

import random

from helpers.notebank_toy_backbone import FILLER, ToyBackbone

from memexp.core.types import Question, Record
from memexp.methods.notebank.config import NoteBankConfig
from memexp.methods.notebank.method import NoteBank  # noqa: E402
from memexp.run.tracking import records_table  # noqa: E402

ZEBRA = "the code of zebra is seven."


def test_replayed_notes_text_is_the_context_span_and_reaches_the_table():
    bb = ToyBackbone(seed=0)
    rng = random.Random(0)
    fill = " ".join(" ".join(rng.choice(FILLER) for _ in range(8)) + " ." for _ in range(60))
    ids = bb.tokenizer.encode(" ".join([fill, ZEBRA, fill]))
    nb = NoteBank(NoteBankConfig(chunk_size=256, replay_budget=2))
    memory = nb.read(bb, ids)
    prompt = "tell me about zebra ?"
    answer = nb.answer(bb, memory, bb.tokenizer.encode(prompt), Question("q", prompt, ["seven"], "string_match", 4))
    selected = answer.stats["selected"]
    assert len(selected) == 2
    for e in selected:
        assert e["text"] == bb.tokenizer.decode(ids[e["start"] : e["end"]])
    assert any(ZEBRA in e["text"] for e in selected)

    rec = Record(example_id="e", question_id="q", task="t", length=len(ids), question=prompt, score=0.0,
                 method_stats=answer.stats)
    columns, (row,) = records_table([rec])
    shown = dict(zip(columns, row))
    assert shown["replayed_notes"].split("\n---\n") == [e["text"] for e in selected]
    assert shown["question"] == prompt


def test_a_record_from_before_the_question_field_has_an_empty_question_cell():
    columns, (row,) = records_table([Record(example_id="e", question_id="0", task="t", length=64, score=1.0)])
    assert dict(zip(columns, row))["question"] == "" and dict(zip(columns, row))["replayed_notes"] == ""
