"""The tiny Table 4 (experiment=tiny_notebank_lora): the shipped adapters are what the recipe file
makes, and through `python -m memexp run` NB-LoRA reads the replayed needle where NB-TF, with the
same notes, does not."""

import json

import pytest
from helpers.memexp_process import mean_score, records, run_presets
from safetensors.torch import load_file

from memexp.adapters.io import file_hash
from memexp.cli.train import load_recipe
from memexp.core.file_digest import weights_fingerprint
from memexp.core.schema import ASSETS_DIR
from memexp.training.notebank_lora.train import semantic

PRESET = "tiny_notebank_lora"
SHIPPED = ASSETS_DIR / "tiny_gdn_words_lora"


@pytest.mark.parametrize("method,replay", [("notebank", True), ("plain", False)])
def test_shipped_adapter_is_the_recipe_files(method, replay):
    recipe = load_recipe(["recipe=notebank_lora", "backbone=tiny_gdn_words", f"replay={str(replay).lower()}",
                          "replace_assets=true", f"asset=tiny_gdn_words_lora/{method}"])[0]
    meta = json.loads((SHIPPED / method / "notebank_lora.json").read_text())
    assert meta["recipe_semantic"] == json.loads(json.dumps(semantic(recipe)))
    assert meta["backbone"]["name"] == "tiny_gdn_words" and meta["method"] == method
    # trained on the shipped tiny_gdn_words weights (a replaced model needs these retrained)
    assert meta["backbone"]["weights"] == weights_fingerprint(ASSETS_DIR / "tiny_gdn_words")
    assert meta["steps"] == recipe.steps == len(meta["history"]) and meta["r"] == 8 and meta["alpha"] == 16.0
    # q, k, v, o of 4 layers at r = 8: each 128 x 128 projection gets A (8 x 128) and B (128 x 8)
    tensors = load_file(str(SHIPPED / method / "adapter_model.safetensors"))
    assert sum(t.numel() for t in tensors.values()) == 4 * 4 * (8 * 128 + 128 * 8)
    assert meta["content_hash"] == file_hash(SHIPPED / method)
    assert not (SHIPPED / method / ".checkpoint").exists()
    if replay:
        assert meta["notebank"]["rescale"] is None and meta["notebank"]["router"] == "native"
    else:
        assert meta["notebank"] is None and meta["replay_budget"] is None


def test_nb_lora_reads_the_replayed_needle_nb_tf_does_not(tmp_path):
    # at 16x the training length (README, 20 examples, seeds 42 / 9090: NB-LoRA 95 / 100, NB-TF 60 / 65;
    # on seed 42's first 8, 7 against 3): 8 examples must show a gap of at least 25 points
    short = ("bench.lengths=[16384]", "bench.num_samples=8")
    runs = run_presets(tmp_path, PRESET, {"lora": ("notebank", *short), "tf": ("notebank", "method.adapter=null", *short)})
    lora, tf = records(runs["lora"]), records(runs["tf"])
    # the same archive and the same notes (the adapters are off while writing, probing and routing)
    assert [r["method_stats"]["selected"] for r in lora] == [r["method_stats"]["selected"] for r in tf]
    assert all(r["method_stats"]["adapter"]["hash"] == file_hash(SHIPPED / "notebank") for r in lora)
    assert mean_score(lora) >= mean_score(tf) + 25, (mean_score(lora), mean_score(tf))
