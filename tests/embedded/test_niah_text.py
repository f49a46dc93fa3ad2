"""The recipe's training text: deterministic, in RULER's format, disjoint from evaluation streams."""

from memexp.backbones.tokenizer import ByteTokenizer
from memexp.benchmarks.ruler.sample import sample_rng
from memexp.cli.train import load_recipe
from memexp.embedded.niah_text import STREAM_PREFIX, TASK, niah_text, ruler_sample, stream
from memexp.embedded.tiny_gdn import stage_texts

TOK = ByteTokenizer()


def test_batches_are_a_pure_function_of_seed_stage_and_step():
    recipe, _ = load_recipe(["recipe=tiny_gdn"])
    stage = recipe.stages[-1]
    first = stage_texts(recipe, stage, 7, TOK)
    assert first == stage_texts(recipe, stage, 7, TOK)
    assert first != stage_texts(recipe, stage, 8, TOK)
    other_seed, _ = load_recipe(["recipe=tiny_gdn", "seed=1"])
    assert first != stage_texts(other_seed, stage, 7, TOK)


def test_ruler_form_is_the_benchmark_input_followed_by_the_answer():
    text = niah_text(TOK, stream(0, "x"), 3, "ruler", note=False)
    sample = ruler_sample(stream(0, "x"), 3)
    assert text.ids[:text.answer_start] == TOK.encode(sample.context, add_bos=True) + TOK.encode(sample.prompt)
    assert TOK.decode(text.ids[text.answer_start:]) == f" {sample.answers[0]}."
    assert text.ids[-1] == TOK.eos_id
    assert sample.context.count("The grass is green.") == 3


def test_needle_span_is_the_needle_sentence_in_every_form():
    for question, note in (("ruler", False), ("short", False), ("ruler", True)):
        text = niah_text(TOK, stream(0, "span", question, note), 7, question, note=note)
        key = ruler_sample(stream(0, "span", question, note), 7).meta["needles"][0]["key"]
        span = TOK.decode(text.ids[text.needle_start:text.needle_end])
        assert span == f"One of the special magic numbers for {key} is: {text.value}."
        assert "magic numbers" not in TOK.decode(text.ids[:text.needle_start])


def test_note_form_is_what_notebank_replays_after_a_reset():
    text = niah_text(TOK, stream(0, "y"), 5, "ruler", note=True, replay_suffix=" ")
    prompt = TOK.decode(text.ids[:text.answer_start])
    assert prompt.startswith("One of the special magic numbers for ")
    assert f"is: {text.value}. \nWhat is the special magic number for " in prompt
    assert "grass" not in prompt


def test_short_form_drops_the_task_text_and_asks_briefly():
    text = niah_text(TOK, stream(0, "z"), 2, "short", note=False)
    prompt = TOK.decode(text.ids[:text.answer_start])
    assert not prompt.startswith("A special magic")
    assert prompt.endswith("is") and "\nThe special magic number for " in prompt


def test_training_streams_never_coincide_with_rulers_evaluation_streams():
    train = {ruler_sample(stream(0, "ruler", step, i), 1).answers[0] for step in range(20) for i in range(16)}
    evaluation = {ruler_sample(sample_rng(TASK, 42, i), 1).answers[0] for i in range(200)}
    assert not train & evaluation
    assert not f"{TASK}/42/0".startswith(STREAM_PREFIX)
