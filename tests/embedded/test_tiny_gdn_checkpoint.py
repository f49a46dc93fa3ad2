"""The committed tiny_gdn checkpoint: loads offline from any directory, answers deterministically,
and does what the recipe promises at its training length."""

import json

import torch
from helpers.memexp_process import python

from memexp.backbones import backbone_config, load_backbone
from memexp.core.schema import ASSETS_DIR
from memexp.embedded.niah_eval import plain_accuracy

CHECKPOINT = ASSETS_DIR / "tiny_gdn"


def test_the_backbone_config_points_at_the_package_assets():
    cfg = backbone_config("tiny_gdn")
    assert cfg.pretrained == str(CHECKPOINT)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "recipe.json"):
        assert (CHECKPOINT / name).is_file(), name
    size = sum(p.stat().st_size for p in CHECKPOINT.iterdir())
    assert size < 20_000_000


def test_it_loads_offline_from_another_working_directory(tmp_path):
    code = ("from memexp.backbones import load_backbone; bb = load_backbone('tiny_gdn'); "
            "print(bb.name, bb.config.num_hidden_layers, bb.tokenizer.vocab_size)")
    out = python("-c", code, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["tiny_gdn", "2", "258"]


def test_generation_is_deterministic():
    bb = load_backbone("tiny_gdn")
    prompt = bb.tokenizer.encode("One of the special magic numbers for quiet-river is: 4417201.\n"
                                 "What is the special magic number for quiet-river mentioned in the provided text? "
                                 "The special magic number for quiet-river mentioned in the provided text is",
                                 add_bos=True)
    runs = [bb.generate(bb.init_state(), prompt, 12) for _ in range(2)]
    assert runs[0] == runs[1]
    assert "4417201" in bb.tokenizer.decode(runs[0])


def test_plain_answers_rulers_niah_single_1_at_the_training_length():
    bb = load_backbone("tiny_gdn")
    recipe = json.loads((CHECKPOINT / "recipe.json").read_text())
    length = recipe["recipe"]["eval_length"]
    assert plain_accuracy(bb, "niah_single_1", length, num_samples=20) >= 85.0
    torch.set_num_threads(1)
