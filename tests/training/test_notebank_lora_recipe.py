"""The notebank_lora recipe: NQ rows -> examples, a short run lowers the answer loss, resume ==
uninterrupted, the Plain + LoRA control, one-line errors."""

import json
import random

import pytest
import torch

from memexp.cli.train import load_recipe, run_config
from memexp.core.file_digest import weights_fingerprint
from memexp.core.schema import ConfigError, asset_path
from memexp.training.notebank_lora import train as notebank_train
from memexp.training.notebank_lora.data import nq_examples
from memexp.training.notebank_lora.recipe import DataConfig


def run(recipe, log) -> dict:
    """The recipe's run, given the run configuration `memexp train` composes for it."""
    return notebank_train.run(recipe, log, cfg=run_config(recipe))


def nq_row(i: int, answer: str, docs: int = 3, doc_chars: int = 60, trailer: str = "") -> dict:
    documents = "".join(f"Document [{k + 1}](Title: T{i}.{k}) " + f"w{i}x{k} " * (doc_chars // 6) + "\n"
                        for k in range(docs))
    return {"text": f"Write a high-quality answer.\n\n{documents}\nQuestion: who is number {i}?\nAnswer: "
                    f"{answer}{trailer}"}


def test_nq_rows_become_the_papers_pool(tmp_path):
    rows = [nq_row(0, "w0x1 w0x1"),                                  # answerable
            nq_row(1, "somebody else", trailer=" [Gold Document: 2]"),  # no-support; trailer dropped
            nq_row(2, " ".join(["long"] * 25)),                      # 25 words: out
            {"text": "A book summary without documents.\nQuestion: what?\nAnswer: this"},  # another source
            nq_row(4, "w4x2", docs=40),                              # capped at a document boundary
            nq_row(5, "w5x0")]
    path = tmp_path / "nq.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    d = DataConfig(max_context_chars=400, examples=3)
    got = nq_examples(d, str(path))
    pool = ["nq.jsonl:0", "nq.jsonl:1", "nq.jsonl:4", "nq.jsonl:5"]
    random.Random(0).shuffle(pool)
    assert [e.id for e in got] == pool[:3]
    by_id = {e.id: e for e in nq_examples(DataConfig(max_context_chars=400), str(path))}
    assert by_id["nq.jsonl:1"].answer == "somebody else" and not by_id["nq.jsonl:1"].answerable
    assert by_id["nq.jsonl:0"].answerable and by_id["nq.jsonl:0"].question == "who is number 0?"
    capped = by_id["nq.jsonl:4"].context
    assert len(capped) <= 400
    assert capped.rstrip().split("\n")[-1].startswith("Document [") and "Document [40]" not in capped
    assert "Question:" not in capped


def test_unreadable_data_is_one_line(tmp_path):
    (tmp_path / "x.jsonl").write_text(json.dumps({"body": "no text field"}) + "\n")
    for path, what in ((tmp_path / "x.jsonl", "text field"), (tmp_path / "none", "no such")):
        with pytest.raises(ConfigError) as e:
            nq_examples(DataConfig(), str(path))
        assert "\n" not in str(e.value) and what in str(e.value)


def tiny(tmp_path, name, *extra):
    args = ["recipe=notebank_lora", "backbone=tiny_gdn", f"output={tmp_path / name}", "data.lengths=[1024]",
            "data.tasks=[niah_multikey_3]", "data.samples=4", "data.examples=4", "accumulate=2", "steps=6",
            "checkpoint_every=2", "log_every=100", "threads=1", "lr=5e-3", *extra]
    return load_recipe(args)[0]


def adapter_tensors(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "adapter_model.safetensors"))


def stepwise_answer_nll(recipe, folder) -> float:
    """Mean answer NLL over the training examples, read the way `memexp run` reads them
    (NoteBank's read / answer path, one forward per token), with the adapter in `folder`."""
    from dataclasses import replace

    from memexp.backbones import load_backbone
    from memexp.backbones.base import Stopwatch
    from memexp.methods import build_method
    from memexp.training.notebank_lora.data import train_examples
    cfg = notebank_train.run_config(recipe, run_config(recipe))
    backbone = load_backbone(cfg.backbone)
    method = build_method(replace(cfg.method, adapter=str(folder)))
    method.prepare(backbone)
    total, n = 0.0, 0
    for ex in train_examples(recipe.data, None, backbone.tokenizer):
        memory = method.read(backbone, ex.context_ids)
        notes = method.select(backbone, memory, ex.question_ids, ex.question, Stopwatch())[1]
        state = memory.state.clone()
        with method.adapter.on(backbone):
            logits = backbone.forward(state, notes + ex.question_ids)
            for t in ex.target_ids:
                total -= torch.log_softmax(logits, -1)[t].item()
                n += 1
                logits = backbone.forward(state, [t])
    return total / n


def test_short_run_lowers_the_answer_loss(tmp_path):
    recipe = tiny(tmp_path, "a", "steps=8")
    record = run(recipe, log=lambda line: None)
    start = tiny(tmp_path, "zero", "steps=1", "lr=1e-12")  # B stays ~0: the frozen reader's loss
    run(start, log=lambda line: None)
    before, after = stepwise_answer_nll(recipe, tmp_path / "zero"), stepwise_answer_nll(recipe, tmp_path / "a")
    assert after < before - 0.5, (before, after)
    meta = json.loads((tmp_path / "a" / "notebank_lora.json").read_text())
    assert meta["backbone"]["name"] == "tiny_gdn" and meta["method"] == "notebank" and meta["replay_budget"] == 2
    assert meta["layers"] == [0, 1] and meta["r"] == 8 and meta["steps"] == 8 == len(record["history"])
    assert not (tmp_path / "a" / ".checkpoint").exists()


def test_interrupted_and_resumed_equals_uninterrupted(tmp_path):
    run(tiny(tmp_path, "straight"), log=lambda line: None)

    def interrupt(line):
        if line.startswith("checkpoint") and "update 4" in line:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(tiny(tmp_path, "cut"), log=interrupt)
    assert (tmp_path / "cut" / ".checkpoint" / "state.pt").exists()
    lines = []
    run(tiny(tmp_path, "cut"), log=lines.append)
    assert any("resuming" in line and "update 4/6" in line for line in lines)
    a, b = adapter_tensors(tmp_path / "straight"), adapter_tensors(tmp_path / "cut")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(a[k].abs().sum() > 0 for k in a if k.endswith("lora_B"))
    again = []
    run(tiny(tmp_path, "cut"), log=again.append)  # finished: nothing to do
    assert "already trained" in again[0]
    with pytest.raises(ConfigError) as e:  # a finished adapter of another recipe is not overwritten
        run(tiny(tmp_path, "cut", "steps=7"), log=lambda line: None)
    assert "\n" not in str(e.value) and "recipe.steps differs" in str(e.value)
    # nor one of this recipe trained on other base weights (a replaced checkpoint of the same shape)
    meta = tmp_path / "cut" / "notebank_lora.json"
    record = json.loads(meta.read_text())
    assert record["backbone"]["weights"] == weights_fingerprint(asset_path("tiny_gdn"))
    record["backbone"]["weights"] = "0" * 16
    meta.write_text(json.dumps(record))
    with pytest.raises(ConfigError) as e:
        run(tiny(tmp_path, "cut"), log=lambda line: None)
    assert "\n" not in str(e.value) and "other tiny_gdn weights" in str(e.value)


def test_replace_assets_retrains_a_shipped_adapter_of_other_weights_or_recipe(tmp_path, monkeypatch):
    """replace_assets=true asks for the shipped folder to be this recipe's adapter on today's
    weights: one of other weights, then one of another recipe, is trained over; a current one is kept."""
    import memexp.training.notebank_lora.train as train

    monkeypatch.setattr(train, "ASSETS_DIR", tmp_path)

    def recipe(*extra):
        return load_recipe(["recipe=notebank_lora", "backbone=tiny_gdn", "replace_assets=true", "asset=shipped",
                            "data.lengths=[1024]", "data.tasks=[niah_single_1]", "data.samples=2",
                            "data.examples=2", "accumulate=1", "steps=2", "log_every=100", "threads=1",
                            *extra])[0]

    run(recipe(), log=lambda line: None)
    meta = tmp_path / "shipped" / "notebank_lora.json"
    record = json.loads(meta.read_text())
    record["backbone"]["weights"] = "0" * 16
    meta.write_text(json.dumps(record))
    lines = []
    run(recipe(), log=lines.append)
    assert not any("already trained" in line for line in lines)
    assert json.loads(meta.read_text())["backbone"]["weights"] == weights_fingerprint(asset_path("tiny_gdn"))
    run(recipe("steps=3"), log=lambda line: None)
    assert json.loads(meta.read_text())["steps"] == 3
    again = []
    run(recipe("steps=3"), log=again.append)
    assert "already trained" in again[0]


def test_cached_reads_give_the_same_adapter_with_each_example_read_once(tmp_path, monkeypatch):
    import memexp.training.notebank_lora.train as train

    calls = []
    real = train.read_example
    monkeypatch.setattr(train, "read_example", lambda *a: calls.append(a[2].text.id) or real(*a))
    run(tiny(tmp_path, "read_each_time"), log=lambda line: None)
    assert len(calls) == 12  # 6 updates x 2 examples
    calls.clear()
    run(tiny(tmp_path, "cached", "cache_reads=true"), log=lambda line: None)
    assert sorted(calls) == sorted(set(calls)) and len(calls) == 4  # the pool of 4, once each
    a, b = adapter_tensors(tmp_path / "read_each_time"), adapter_tensors(tmp_path / "cached")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # the cache is not part of the adapter's identity: a cached run resumes an uncached one's folder
    again = []
    run(tiny(tmp_path, "read_each_time", "cache_reads=true"), log=again.append)
    assert "already trained" in again[0]


def test_a_checkpoint_of_another_recipe_is_not_resumed(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        run(tiny(tmp_path, "x"), log=lambda line: (_ for _ in ()).throw(KeyboardInterrupt) if "checkpoint" in line
            else None)
    with pytest.raises(ConfigError) as e:
        run(tiny(tmp_path, "x", "lr=1e-3"), log=lambda line: None)
    assert "\n" not in str(e.value) and "recipe.lr differs" in str(e.value)


def test_plain_lora_control_trains_without_notes(tmp_path):
    record = run(tiny(tmp_path, "p", "replay=false", "steps=2"), log=lambda line: None)
    assert record["method"] == "plain" and record["replay_budget"] is None
    with_replay = run(tiny(tmp_path, "n", "steps=2"), log=lambda line: None)
    # the same examples and updates; only the replayed notes add tokens
    assert with_replay["tokens"] > record["tokens"] and with_replay["examples"] == record["examples"]


def test_placement_and_recipe_errors_are_one_line(tmp_path):
    recipe = load_recipe(["recipe=notebank_lora", "backbone=tiny_gdn_random", f"output={tmp_path}"])[0]
    with pytest.raises(ConfigError) as e:
        run(recipe, log=lambda line: None)
    assert "\n" not in str(e.value) and "notebank_lora_tiny_gdn_random.yaml" in str(e.value)
    for bad, field in (("schedule=linear", "recipe.schedule"), ("data.source=web", "recipe.data.source"),
                       ("data.seed=42", "recipe.data.seed")):
        with pytest.raises(ConfigError) as e:
            load_recipe(["recipe=notebank_lora", "backbone=tiny_gdn", f"output={tmp_path}", bad])
        assert "\n" not in str(e.value) and field in str(e.value)


def test_paper_placements_resolve_per_backbone():
    """The paper's layers and projections (App. C.4), counted in the module names they give."""
    expected = {"gdn": ([11, 15, 18, 22], "model.layers.11.attn.q_proj", 16),
                "gdn2": ([8, 11, 13, 16], "transformer.h.8.attn.o_proj", 16),
                "mamba2": ([23, 31, 37, 45], "backbone.layers.45.mixer.out_proj", 8)}
    for backbone, (layers, name, count) in expected.items():
        recipe = load_recipe(["recipe=notebank_lora", f"backbone={backbone}", "output=/tmp/unused"])[0]
        assert recipe.lora.layers == layers and name in recipe.lora.targets()
        assert len(recipe.lora.targets()) == count and (recipe.steps, recipe.accumulate, recipe.lr) == (600, 4, 5e-4)
    assert load_recipe(["recipe=notebank_lora", "backbone=mamba2", "output=/tmp/u"])[0].lora.rows == \
        {"*.in_proj": ["xBC"]}


def test_wandb_curves_when_the_logger_is_on(tmp_path, monkeypatch):
    import sys
    import types

    logged, finished = [], []

    class FakeRun:
        def log(self, row, step):
            logged.append((step, row))

        def finish(self):
            finished.append(True)

    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace(init=lambda **kw: FakeRun()))
    run(tiny(tmp_path, "w", "steps=3", "logger.name=wandb", "logger.mode=offline"), log=lambda line: None)
    assert [step for step, _ in logged] == [1, 2, 3] and finished == [True]
    assert set(logged[0][1]) == {"train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s"}
    assert all(row["train/lr"] == 5e-3 and row["train/loss"] > 0 for _, row in logged)


def test_memexp_data_for_a_recipe_says_what_it_can(monkeypatch):
    from memexp.cli.data import download_recipe

    with pytest.raises(ConfigError, match="made locally"):
        download_recipe(["recipe=notebank_lora", "backbone=tiny_gdn"])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError) as e:
        download_recipe(["recipe=notebank_lora", "backbone=gdn"])
    assert "\n" not in str(e.value) and "recipe.data_path" in str(e.value)
