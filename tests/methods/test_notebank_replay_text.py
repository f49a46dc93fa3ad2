"""NoteBank's replay text is the paper's (Eq. 6, App. B.4): the routed notes' original token ids,
back to back in document order, then the question, with nothing between notes and nothing
before the question. The toy tokenizer here makes every space a token, so a separator or
suffix of " " (memexp's former default) would add ids and change the answer."""

import random

from helpers.notebank_toy_backbone import FILLER, SpacedTokenizer, ToyBackbone

from memexp.core.types import Question
from memexp.methods.notebank.config import NoteBankConfig
from memexp.methods.notebank.method import NoteBank


def spaced_setup():
    bb = ToyBackbone(seed=0, tokenizer=SpacedTokenizer())
    rng = random.Random(0)
    filler = " ".join(" ".join(rng.choice(FILLER) for _ in range(rng.randint(6, 12))) + " ." for _ in range(120))
    text = " ".join([filler, "the code of zebra is seven .", filler, "the river of kite is nine .", filler])
    ids = bb.tokenizer.encode(text)
    assert bb.tokenizer.encode(" ") == [bb.tokenizer.index[" "]]  # a space is an id here
    return bb, ids


def test_default_replay_is_the_notes_ids_back_to_back_then_the_question():
    bb, ids = spaced_setup()
    nb = NoteBank(NoteBankConfig(chunk_size=256, replay_budget=3))
    memory = nb.read(bb, ids)
    assert memory.stats["notes"] >= 3
    prompt = "tell me about zebra and kite ?"
    question_ids = bb.tokenizer.encode(prompt)
    answer = nb.answer(bb, memory, question_ids, Question("q", prompt, ["seven"], "string_match", 6))
    selected = answer.stats["selected"]
    assert len(selected) == 3
    # the expected sequence, built from the archive's spans by hand: context ids of each span, in
    # order of their start position, then the question ids
    spans = sorted((e["start"], e["end"]) for e in selected)
    notes = [tok for start, end in spans for tok in ids[start:end]]
    assert answer.tokens["replay"] == len(notes) == sum(end - start for start, end in spans)
    state = memory.state.clone()
    assert answer.ids == bb.generate(state, notes + question_ids, 6)
    # the former default form (" " between notes and before the question) adds one id per gap and one
    # before the question: the same notes, more replay
    spaced = NoteBank(NoteBankConfig(chunk_size=256, replay_budget=3, note_separator=" ", replay_suffix=" "))
    other = spaced.answer(bb, memory, question_ids, Question("q", prompt, ["seven"], "string_match", 6))
    assert other.stats["selected"] == selected and other.tokens["replay"] == len(notes) + 3


def test_the_schema_defaults_put_nothing_between_notes_or_before_the_question():
    cfg = NoteBankConfig()
    assert (cfg.note_separator, cfg.replay_suffix) == ("", "")
