"""`python -m memexp train recipe=tiny_gdn` end to end in two steps, and its config errors."""

import json

import pytest
import torch

from memexp.backbones import load_backbone
from memexp.cli.train import load_recipe, main
from memexp.core.schema import ConfigError


def test_two_training_steps_write_a_checkpoint_the_gdn_loader_reads(tmp_path):
    out = tmp_path / "ckpt"
    two_steps = "[{name: s, steps: 2, batch_size: 2, lr: 1.0e-3, question: ruler, min_lines: 1, max_lines: 2}]"
    rc = main(["recipe=tiny_gdn", f"output={out}", f"stages={two_steps}", "eval_samples=0", "threads=1",
               "model.hidden_size=32", "model.head_dim=16"])
    assert rc == 0
    record = json.loads((out / "recipe.json").read_text())
    assert record["stages"][0]["steps"] == 2 and record["stages"][0]["tokens"] > 0
    assert record["recipe"]["seed"] == 0 and record["train_seconds"] >= 0
    bb = load_backbone({"name": "tiny_gdn", "arch": "gdn", "pretrained": str(out)})
    assert bb.config.hidden_size == 32 and bb.tokenizer.encode("ab") == [97, 98]
    assert torch.isfinite(bb.forward(bb.init_state(), bb.tokenizer.encode("One of the"))).all()


def test_gates_start_with_long_memory():
    from memexp.embedded.tiny_gdn import build_model

    recipe, _ = load_recipe(["recipe=tiny_gdn"])
    for layer in build_model(recipe).model.layers:
        decay = torch.nn.functional.softplus(layer.attn.dt_bias) * layer.attn.A_log.exp()
        assert ((decay >= recipe.decay_min * 0.999) & (decay <= recipe.decay_max * 1.001)).all()


@pytest.mark.parametrize("override, field", [
    ("stages.0.question=long", "recipe.stages.0.question"),
    ("stages.1.min_lines=0", "recipe.stages.1"),
    ("bogus=1", "recipe.bogus"),
    ("recipe=nope", "recipe="),
])
def test_a_wrong_value_names_its_field(override, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        load_recipe(["recipe=tiny_gdn", override] if not override.startswith("recipe=") else [override])
