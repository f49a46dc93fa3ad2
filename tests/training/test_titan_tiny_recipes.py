"""The embedded demonstration's two recipes for a few steps at tiny sizes: tiny_llama_niah writes a
Llama folder the llama loader reads, tiny_titan post-trains every layer of it and writes modules
that experiment=tiny_titan's Titan job runs (one RULER example), and the preset's variants."""

from __future__ import annotations

import json

import pytest
import torch

from memexp.backbones import load_backbone
from memexp.cli.train import main
from memexp.core.compose import load_config, sweep_jobs

STEPS2 = "[{name: s, steps: 2, batch_size: 2, lr: 1.0e-3, question: ruler, min_lines: 1, max_lines: 2}]"


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny_llama") / "base"
    rc = main(["recipe=tiny_llama_niah", f"output={out}", f"stages={STEPS2}", "eval_samples=0", "threads=1",
               "copy.steps=2", "copy.batch_size=2", "model.hidden_size=32", "model.intermediate_size=64"])
    assert rc == 0
    return out


def test_tiny_llama_niah_writes_a_llama_folder_the_loader_reads(base):
    record = json.loads((base / "recipe.json").read_text())
    assert [(st["name"], st["steps"]) for st in record["stages"]] == [("copy", 2), ("s", 2)]
    assert all(st["tokens"] > 0 for st in record["stages"])
    bb = load_backbone({"name": "t", "arch": "llama", "pretrained": str(base)})
    assert bb.config.hidden_size == 32 and bb.config.num_hidden_layers == 2 and bb.tokenizer.encode("ab") == [97, 98]
    # 2 layers x (q 32x32, k and v 32x16 (2 KV heads of 8), o 32x32, MLP 3 x 32x64, 2 norms) + embeddings and head
    per_layer = 32 * 32 * 2 + 32 * 16 * 2 + 3 * 32 * 64 + 2 * 32
    assert record["parameters"] == 2 * per_layer + 2 * 258 * 32 + 32
    assert torch.isfinite(bb.forward(bb.init_state(), bb.tokenizer.encode("One of the"))).all()


def test_the_copy_warm_up_repeats_a_random_string_and_weights_only_the_repeat():
    from memexp.backbones.tokenizer import ByteTokenizer
    from memexp.cli.train import load_recipe
    from memexp.embedded.tiny_llama import copy_batch

    recipe = load_recipe(["recipe=tiny_llama_niah", "output=unused"])[0]
    tok = ByteTokenizer()
    lengths = set()
    for step in range(20):
        ids, weights = copy_batch(recipe, step, tok)
        assert ids.shape[0] == recipe.copy.batch_size and weights.shape == (ids.shape[0], ids.shape[1] - 1)
        for row, w in zip(ids.tolist(), weights.tolist()):
            text = bytes(row[1:]).decode()  # after BOS: "<s>\n<s>"
            first, second = text.split("\n")
            assert row[0] == tok.bos_id and first == second and set(first) <= set("0123456789abcdefghijklmnopqrstuvwxyz")
            n = len(first)
            lengths.add(n)
            # position i predicts token i + 1: the last n predict the second copy
            assert w[-n:] == [1.0] * n and w[:-n] == pytest.approx([recipe.other_weight] * (len(w) - n))
        assert copy_batch(recipe, step, tok)[0].equal(ids)  # deterministic in (seed, step)
    assert len(lengths) > 5 and min(lengths) >= recipe.copy.min_chars and max(lengths) <= recipe.copy.max_chars


def test_tiny_titan_trains_every_layer_and_the_preset_runs_its_modules(base, tmp_path):
    out = tmp_path / "titan"
    rc = main(["recipe=tiny_titan", f"output={out}", f"backbone_fields.pretrained={base}", "threads=1", "log_every=1",
               "stages=[{name: niah, data: niah, total_tokens: 8192, batch_size: 2, micro_batch_size: 2}]"])
    assert rc == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and {"layer0/lambda", "layer1/lambda"} <= set(rows[0])
    modules = out / "niah" / "modules"
    spec = json.loads((modules / "titan_memory.json").read_text())
    assert spec["config"]["layers"] == 2 and spec["shapes"]["num_hidden_layers"] == 2  # every layer converted
    from memexp.run.runner import run

    cfg = load_config(["experiment=tiny_titan", "method=titan", f"backbone.pretrained={base}",
                       f"method.memory_path={modules}", f"output_dir={tmp_path / 'runs'}", "bench.lengths=[1024]",
                       "bench.num_samples=1", "progress=false"])
    summary = run(cfg)
    records = [json.loads(line) for line in next((tmp_path / "runs").rglob("records.jsonl")).read_text().splitlines()]
    assert len(records) == 1 and records[0]["length"] in (1024, "1024") and 0 <= records[0]["score"] <= 100
    assert summary


def test_the_tiny_titan_preset_compares_full_segmented_and_titan(base):
    cfgs = [load_config(j) for j in sweep_jobs(["experiment=tiny_titan", "method=plain,titan_segmented,titan",
                                                 f"backbone.pretrained={base}"])]
    got = {(c.method.name, getattr(c.method, "memory", None)) for c in cfgs}
    assert got == {("plain", None), ("titan_segmented", False), ("titan", True)}
    for c in cfgs:
        assert (c.bench.tasks, c.bench.lengths, c.bench.seed) == (["niah_single_1"], [512, 1024, 1536, 2048], 42)
        if c.method.name == "titan":
            assert (c.method.layers, c.method.segment_length) == (2, 512)  # all layers; 4x the segment is the longest
    window = load_config(["experiment=tiny_titan", "method=plain", "backbone.window=512", f"backbone.pretrained={base}"])
    assert window.backbone.window == 512


@pytest.mark.parametrize("placement", ["anywhere", "earlier_segment"])
def test_niah_needle_placement_earlier_segment_keeps_every_needle_out_of_the_questions_segment(placement):
    from types import SimpleNamespace

    from memexp.backbones.tokenizer import ByteTokenizer
    from memexp.cli.train import load_recipe
    from memexp.embedded.tiny_titan import niah
    from memexp.training.titan_llama.data import IGNORE, Formatter

    recipe = load_recipe(["recipe=tiny_titan", "output=unused", f"niah.needle={placement}"])[0]
    tok = ByteTokenizer()
    W = recipe.method["segment_length"]
    seqs = niah(recipe, recipe.stages[0], Formatter(SimpleNamespace(tokenizer=tok, chat_template=None)))
    same_segment = 0
    for _ in range(40):
        seq = next(seqs)
        text = bytes(t for t in seq.ids if t < 256).decode()
        answer_start = next(i for i, label in enumerate(seq.labels) if label != IGNORE)
        assert len(seq.ids) <= recipe.sequence_length and seq.labels[-1] == tok.eos_id  # the whole answer kept
        needle_end = 1 + text.index(".", text.index("special magic numbers")) + 1  # + 1: BOS
        same_segment += (needle_end - 1) // W == answer_start // W
    if placement == "earlier_segment":
        assert same_segment == 0
    else:
        assert same_segment > 0  # RULER's depths put some needles beside the question: the control is not vacuous


def test_replace_assets_ships_the_base_model_and_the_last_stages_modules(base, tmp_path, monkeypatch):
    import memexp.embedded.tiny_llama as tiny_llama
    import memexp.training.titan_llama.run as titan_run

    assets = tmp_path / "assets"
    monkeypatch.setattr(tiny_llama, "ASSETS_DIR", assets)
    monkeypatch.setattr(titan_run, "ASSETS_DIR", assets)
    monkeypatch.chdir(tmp_path)  # the titan run folder defaults to outputs/train/<asset>/<time>
    assert main(["recipe=tiny_llama_niah", "replace_assets=true", f"stages={STEPS2}", "eval_samples=0",
                 "threads=1", "copy.steps=2", "copy.batch_size=2", "model.hidden_size=32",
                 "model.intermediate_size=64"]) == 0
    shipped = assets / "tiny_llama_niah"
    assert {"config.json", "model.safetensors", "recipe.json"} <= {f.name for f in shipped.iterdir()}
    # the recipe is deterministic in its seed: the shipped weights are the fixture's, bit for bit
    assert (shipped / "model.safetensors").read_bytes() == (base / "model.safetensors").read_bytes()
    two = ("[{name: a, data: niah, total_tokens: 4096, batch_size: 1, micro_batch_size: 1},"
           " {name: b, data: niah, total_tokens: 4096, batch_size: 1, micro_batch_size: 1}]")
    assert main(["recipe=tiny_titan", "replace_assets=true", "asset=tt", f"backbone_fields.pretrained={shipped}",
                 "threads=1", f"stages={two}"]) == 0
    run_folder = next((tmp_path / "outputs" / "train" / "tt").iterdir())
    for name in ("titan_memory.json", "titan_memory.safetensors"):
        assert (assets / "tt" / name).read_bytes() == (run_folder / "b" / "modules" / name).read_bytes()
    tensors = "titan_memory.safetensors"  # the first stage's differ: what ships is the last stage's
    assert (assets / "tt" / tensors).read_bytes() != (run_folder / "a" / "modules" / tensors).read_bytes()
    assert json.loads((assets / "tt" / "recipe.json").read_text())["recipe"]["asset"] == "tt"


def test_niah_settings_no_sequence_can_meet_stop_with_the_fields_named():
    from types import SimpleNamespace

    from memexp.backbones.tokenizer import ByteTokenizer
    from memexp.cli.train import load_recipe
    from memexp.embedded.tiny_titan import niah
    from memexp.training.titan_llama.data import Formatter

    # one noise line makes a ~440-token sequence: its needle can never lie a 512-token segment before the question
    recipe = load_recipe(["recipe=tiny_titan", "output=unused", "niah.needle=earlier_segment", "niah.min_lines=1",
                          "niah.max_lines=1"])[0]
    with pytest.raises(ValueError, match="niah.needle=earlier_segment"):
        next(niah(recipe, recipe.stages[0], Formatter(SimpleNamespace(tokenizer=ByteTokenizer(), chat_template=None))))
