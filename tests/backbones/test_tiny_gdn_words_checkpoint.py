"""The committed tiny_gdn_words checkpoint: loads offline from any directory with its own word
tokenizer, generates deterministically, records how it was made, and runs NoteBank with the native router."""

import json

from helpers.memexp_process import python

from memexp.backbones import backbone_config, load_backbone
from memexp.core.schema import ASSETS_DIR

CHECKPOINT = ASSETS_DIR / "tiny_gdn_words"


def test_the_asset_is_complete_small_and_records_its_recipe():
    assert backbone_config("tiny_gdn_words").pretrained == str(CHECKPOINT)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "recipe.json"):
        assert (CHECKPOINT / name).is_file(), name
    assert sum(p.stat().st_size for p in CHECKPOINT.iterdir()) < 30_000_000
    record = json.loads((CHECKPOINT / "recipe.json").read_text())
    assert record["train_length"] == 1024 and record["recipe"]["seed"] == 0
    # one run, or a run continued from an earlier one (init_from): its record comes along, and the
    # totals add both; together they are the recipe file's stages, in order
    runs, previous = [record], record["init_from"]
    while previous:
        runs.insert(0, previous)
        previous = previous["init_from"]
    assert record["tokens"] == sum(s["tokens"] for r in runs for s in r["stages"]) > 0
    assert record["steps"] == sum(s["steps"] for r in runs for s in r["stages"])
    assert sum(s["seconds"] for r in runs for s in r["stages"]) <= record["train_seconds"] < 45 * 60
    from memexp.cli.train import load_recipe

    recipe, _ = load_recipe(["recipe=tiny_gdn_words"])
    assert [s["name"] for r in runs for s in r["stages"]] == [s.name for s in recipe.stages]
    assert all(r["recipe"]["seed"] == recipe.seed for r in runs)
    config = json.loads((CHECKPOINT / "config.json").read_text())
    assert config["num_hidden_layers"] * config["num_heads"] >= 16  # more channels than tiny_gdn's 2 x 2


def test_it_loads_offline_from_another_working_directory(tmp_path):
    code = ("from memexp.backbones import load_backbone; bb = load_backbone('tiny_gdn_words'); "
            "print(bb.name, len(bb.channels), bb.tokenizer.vocab_size > 5000)")
    out = python("-c", code, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["tiny_gdn_words", "16", "True"]


def test_generation_is_deterministic_and_copies_a_needle():
    bb = load_backbone("tiny_gdn_words")
    text = ("A special magic number is hidden within the following text. Make sure to memorize it. I will quiz "
            "you about the number afterwards.\nThe grass is green. The sky is blue. The sun is yellow. Here we go. "
            "There and back again.\nOne of the special magic numbers for quiet-river is: 4417201.\nThe grass is "
            "green. The sky is blue. The sun is yellow. Here we go. There and back again.\nWhat is the special "
            "magic number for quiet-river mentioned in the provided text? The special magic number for "
            "quiet-river mentioned in the provided text is")
    prompt = bb.tokenizer.encode(text, add_bos=True)
    runs = [bb.generate(bb.init_state(), prompt, 12) for _ in range(2)]
    assert runs[0] == runs[1]
    assert "4417201" in bb.tokenizer.decode(runs[0])


def test_its_notebank_runs_are_training_free_with_the_native_router_and_the_essay_stand_in():
    from memexp.core.compose import compose

    cfg = compose(["backbone=tiny_gdn_words"])
    assert cfg.method.name == "notebank" and cfg.method.router == "native"
    # the paper's replay form (nothing between notes or before the question): the model never saw
    # a replayed note, so there is no trained form to match
    assert cfg.method.note_separator == "" and cfg.method.replay_suffix == ""
    assert cfg.bench.essay_standin is True and len(cfg.bench.tasks) == 6
