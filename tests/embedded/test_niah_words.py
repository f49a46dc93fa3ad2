"""tiny_gdn_words' training data: RULER's full input only, never NoteBank's replay form, never an
evaluation stream (the copy warm-up holds no needle, question or task text either); and its
tokenizer: RULER's key words whole, digits in groups of three."""

import random

import pytest

from memexp.benchmarks.ruler.standin import EVAL_SEED, standin_text
from memexp.benchmarks.ruler.tasks import TASKS
from memexp.benchmarks.ruler.templates import NEEDLE
from memexp.benchmarks.ruler.vocabulary import adjectives, nouns
from memexp.cli.train import load_recipe
from memexp.embedded.niah_words import (
    FORMS,
    SIX_TASKS,
    STREAM_PREFIX,
    VARIANTS,
    build_sample,
    example,
    stream,
    tokenizer_corpus,
)
from memexp.embedded.tiny_gdn_words import step_examples
from memexp.embedded.words_tokenizer import train_tokenizer

HEADS = ("Some special magic ", "A special magic ")


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(tokenizer_corpus(0, num_examples=60))


@pytest.fixture(scope="module")
def recipe_batches(tokenizer):
    recipe, _ = load_recipe(["recipe=tiny_gdn_words"])
    return [ex for stage in recipe.stages for step in range(6) for ex in step_examples(recipe, stage, step, tokenizer)]


def test_every_example_is_rulers_full_input_not_a_replayed_note(recipe_batches, tokenizer):
    assert FORMS == ("ruler", "copy")
    tasks, forms = set(), set()
    for ex in recipe_batches:
        forms.add(ex.form)
        if ex.form == "copy":
            # BOS, a passage, a newline, the same passage, EOS: nothing of RULER's text or a needle
            half = (len(ex.ids) - 3) // 2
            assert ex.ids[0] == tokenizer.bos_id and ex.ids[-1] == tokenizer.eos_id and ex.sample is None
            assert ex.ids[1:1 + half] == ex.ids[half + 2:-1] and ex.answer_start == half + 2
            assert tokenizer.decode([ex.ids[half + 1]]) == "\n"
            text = tokenizer.decode(ex.ids)
            assert "special magic" not in text and "What is" not in text
            continue
        tasks.add(ex.task)
        assert ex.form == "ruler"
        sample = ex.sample
        assert ex.ids[0] == tokenizer.bos_id  # a fresh read from the start of a document, never after a reset
        read = tokenizer.decode(ex.ids[: ex.answer_start])
        answer_prefix = "\n" + sample.prompt.split("? ", 1)[1]  # the curriculum's short question
        assert read in (sample.context + sample.prompt, sample.context + answer_prefix)
        assert sample.context.startswith(HEADS)  # RULER's task text comes first
        # the haystack holds more than the needles: remove every needle sentence and text remains
        haystack = sample.context.split("\n", 1)[1]
        for needle in sample.meta["needles"]:
            kind = "numbers" if needle["value"].isdigit() else ("uuids" if needle["value"].count("-") == 4 else "words")
            sentence = NEEDLE.format(type_needle_v=kind, key=needle["key"], value=needle["value"])
            assert sentence in haystack
            haystack = haystack.replace(sentence, "")
        assert len(haystack.split()) >= 5
        assert sample.prompt.count("What ") == 1 and not read.endswith(sample.context[-40:])
    assert tasks <= set(SIX_TASKS) | set(VARIANTS) and len(tasks & set(SIX_TASKS)) >= 5
    assert forms == set(FORMS)


def test_examples_fit_the_training_length_and_the_target_lists_the_values(tokenizer):
    for task in SIX_TASKS:
        ex = example(tokenizer, task, 1024, stream(0, "test", task))
        assert len(ex.ids) <= 1024
        target = tokenizer.decode(ex.ids[ex.answer_start:])
        assert target.endswith(".") and sorted(target.strip(" .").split(", ")) == sorted(ex.sample.answers)


def test_training_streams_are_not_rulers_evaluation_streams():
    # RULER draws example i of a task from random.Random(f"{task}/{seed}/{i}") (sample_rng): a
    # training stream name starts with the recipe's prefix, which is no task name
    assert STREAM_PREFIX not in TASKS and "/" not in STREAM_PREFIX
    assert stream(42, "x").random() != random.Random("niah_single_1/42/0").random()
    essays = set()
    for i in range(20):
        sample = build_sample("niah_single_2", 50, stream(0, "essay", i))
        essays.add(sample.context)
    assert standin_text(EVAL_SEED)[:200] not in "".join(essays)


def test_key_words_are_one_token_and_digits_in_groups_of_three(tokenizer):
    plain_adjectives = [a for a in adjectives() if a.isalpha()]
    plain_nouns = [n for n in nouns() if n.isalpha()]
    for adj, noun in zip(plain_adjectives * 8, plain_nouns):
        ids = tokenizer.encode(f" {adj}-{noun}")
        assert len(ids) == 3, (adj, noun, ids)  # "▁adj", "-", "noun"
    pieces = [tokenizer.decode([i]) for i in tokenizer.encode(" 4417201")]
    assert pieces == [" ", "441", "720", "1"]  # the space, then groups of three from the left
    for number in ("0", "07", "999", "000123"):  # every group is in the vocabulary, none falls to digits
        assert len(tokenizer.encode(number)) == -(-len(number) // 3)
    uuid = "3f2a9b1c-0d4e-4f5a-9b6c-7d8e9fa0b1c2"
    assert tokenizer.decode(tokenizer.encode(f" {uuid}.")) == f" {uuid}."
    assert tokenizer.tok.token_to_id("<unk>") not in tokenizer.encode(f"zyzzyva {uuid} Qx")


@pytest.mark.parametrize("task", ["multikey_noise", "multikey_essay_2", "multiquery_half"])
def test_key_deciding_variants_ask_some_keys_of_several_and_answer_only_theirs(tokenizer, task):
    """Each has more keys in the context than the question asks, so only the key tells which values
    answer; the target lists exactly the asked keys' values in document order; RULER's task text and
    a haystack surround the needles, as in every other training example."""
    for i in range(4):
        ex = example(tokenizer, task, 512, stream(0, "key-variants", task, i))
        meta = ex.sample.meta
        asked = set(meta["queries"])
        assert len(set(meta["keys"])) > len(asked) >= 1
        ordered = sorted(meta["needles"], key=lambda n: n["offset"])
        wanted = [n["value"] for n in ordered if n["key"] in asked]
        assert tokenizer.decode(ex.ids[ex.answer_start:-1]) == " " + ", ".join(wanted) + "."
        assert ex.sample.context.startswith(HEADS) and all(k in ex.sample.prompt for k in asked)
        assert not any(k in ex.sample.prompt for k in set(meta["keys"]) - asked)


def test_a_stage_without_tasks_draws_only_the_six_and_the_word_variants():
    from memexp.embedded.niah_words import WORD_VARIANTS, pick_task

    drawn = {pick_task(random.Random(i), 0.5) for i in range(400)}
    assert drawn == set(SIX_TASKS) | set(WORD_VARIANTS)
