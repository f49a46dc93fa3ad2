"""The embedded Titan-Llama demonstration (experiment=tiny_titan): the shipped base model and memory
modules are what their recipe files make, and through `python -m memexp run` the memory answers
needles that segmented attention, which sees only the question's segment, cannot."""

import json
from dataclasses import asdict
from pathlib import Path

from helpers.memexp_process import mean_score, records, run_presets
from safetensors.torch import load_file

from memexp.cli.train import load_recipe
from memexp.core.schema import ASSETS_DIR, portable_assets

PRESET = "tiny_titan"
BASE, MODULES = ASSETS_DIR / "tiny_llama_niah", ASSETS_DIR / "tiny_titan"


def _recorded(folder: Path) -> dict:
    return json.loads((folder / "recipe.json").read_text())["recipe"]


def test_shipped_base_model_is_the_recipe_files():
    recipe = load_recipe(["recipe=tiny_llama_niah", "replace_assets=true"])[0]
    assert _recorded(BASE) == json.loads(json.dumps(asdict(recipe)))
    record = json.loads((BASE / "recipe.json").read_text())
    assert record["metrics"]["plain_niah_single_1_1024"] >= 90  # the recipe's own check: it retrieves


def test_shipped_memory_modules_are_the_recipe_files():
    recipe = asdict(load_recipe(["recipe=tiny_titan", "replace_assets=true"])[0])
    recorded = _recorded(MODULES)
    # the base model is recorded as an asset, not where memexp was installed when it was trained
    assert recorded["backbone_fields"]["pretrained"] == "${memexp_asset:tiny_llama_niah}"
    assert recipe["backbone_fields"]["pretrained"] == str(BASE)
    recorded.pop("output"), recipe.pop("output")  # the run folder, named by its start time
    assert recorded == json.loads(json.dumps(portable_assets(recipe)))
    stages = json.loads((MODULES / "recipe.json").read_text())["stages"]
    assert [(s["name"], s["finished"]) for s in stages] == [("niah", True), ("niah2", True)]
    assert all("skipped" not in s for s in stages)  # one uninterrupted run made them


def test_shipped_modules_hold_every_layers_memory_gate_and_rates():
    tensors = load_file(str(MODULES / "titan_memory.safetensors"))
    # tiny Llama: hidden 128, 4 query heads and 2 KV heads of 32, 2 layers, both converted. Per layer:
    # 2 memories of three 32 x 32 matrices, theta / eta / alpha = Linear(2 x 32 -> 2) each, the gate
    # Linear(128 -> 4 x 32); layer 1 also mixes its values toward layer 0's, Linear(128 -> 2)
    per_layer = 2 * 3 * 32 * 32 + 3 * (64 * 2 + 2) + (128 * 128 + 128)
    assert sum(t.numel() for t in tensors.values()) == 2 * per_layer + (128 * 2 + 2)
    spec = json.loads((MODULES / "titan_memory.json").read_text())
    assert spec["config"]["layers"] == 2 and spec["config"]["segment_length"] == 512


def test_titan_answers_needles_segmented_attention_cannot(tmp_path):
    # 3x and 4x the segment: most needles lie in a segment before the question's (README, seed 42,
    # 50 examples: Titan 50 / 46, segmented attention 20 / 16)
    short = ("bench.lengths=[1536,2048]", "bench.num_samples=10")
    runs = run_presets(tmp_path, PRESET, {"titan": ("titan", *short), "seg": ("titan_segmented", *short)})
    titan, segmented = records(runs["titan"]), records(runs["seg"])
    assert [r["question_id"] for r in titan] == [r["question_id"] for r in segmented]
    recovered = [t["question_id"] for t, s in zip(titan, segmented) if t["score"] == 100 and s["score"] == 0]
    assert mean_score(titan) >= mean_score(segmented) + 15, (mean_score(titan), mean_score(segmented))
    assert len(recovered) >= 3, recovered


def test_needle_probe_is_zero_without_memory_and_large_with_full_attention():
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "scripts" / "probe" / "titan_needle_probe.py"
    spec = importlib.util.spec_from_file_location("titan_needle_probe", path)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    full, segmented = probe.backbone(str(BASE), "full"), probe.backbone(str(BASE), "segmented")
    pairs = probe.examples(full.tokenizer, 2)
    for true, swapped, start in pairs:
        changed = [i for i, (a, b) in enumerate(zip(true, swapped)) if a != b]
        assert changed and max(changed) < probe.SEGMENT * (start // probe.SEGMENT)  # only the needle, segments back
        gap = probe.answer_loss(full, swapped, start)[0] - probe.answer_loss(full, true, start)[0]
        assert gap > 1.0  # full attention reads the needle's digits
        # segmented attention never sees the needle's segment from the question's: exactly no difference
        assert probe.answer_loss(segmented, swapped, start)[0] == probe.answer_loss(segmented, true, start)[0]
