"""NB-LoRA and Plain + LoRA (`method.adapter=<dir>`): adapters off while reading, writing, probing
and routing (everything bit-identical to NoteBank-TF on CPU), on for replay, question and answer."""

import json
from dataclasses import replace

import pytest
import torch

from memexp.adapters import AdapterError, LoRAConfig, attach_lora, file_hash, save_adapters
from memexp.backbones import load_backbone
from memexp.backbones.base import Stopwatch
from memexp.core.schema import ConfigError
from memexp.core.types import Question
from memexp.methods import build_method
from memexp.methods.notebank.config import NoteBankConfig
from memexp.methods.plain.config import PlainConfig
from memexp.methods.read_adapter import META_FILE, check_backbone

TARGETS = ["model.layers.*.attn.q_proj", "model.layers.*.attn.k_proj", "model.layers.*.attn.v_proj",
           "model.layers.*.attn.o_proj"]
TINY_SHAPE = {"hidden_size": 128, "num_hidden_layers": 2, "num_heads": 2, "head_dim": 64, "vocab_size": 258}


@pytest.fixture(scope="module")
def backbone():
    return load_backbone("tiny_gdn")


def make_adapter(backbone, folder, b_scale: float, name="tiny_gdn", shape=None, weights=None):
    """An adapter folder as the recipe writes it, with B ~ b_scale * N(0, 1) (0: the initial B);
    `weights`: the base checkpoint's fingerprint it records (None: a record from before it did)."""
    lora = attach_lora(backbone, LoRAConfig(targets=TARGETS, rank=4, alpha=8.0, seed=3))
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for u in lora.updates:
            u.lora_B.copy_(b_scale * torch.randn(u.lora_B.shape, generator=gen))
    save_adapters(lora, folder)
    meta = {"backbone": {"name": name, "arch": "gdn", "shape": shape or TINY_SHAPE, "weights": weights},
            "method": "notebank",
            "r": 4, "alpha": 8.0, "layers": [0, 1], "targets": TARGETS, "replay_budget": 2, "recipe": {}}
    (folder / META_FILE).write_text(json.dumps(meta))
    return str(folder)


def context_and_question(tok):
    text = ("The grass is green. The sky is blue. " * 12 + "The special magic number for apple is 4721. "
            + "Here we go again, said the man. " * 30)
    question = Question("q", " What is the special magic number for apple? Answer:", ["4721"], "string_match_all", 8)
    return tok.encode(text, add_bos=True), tok.encode(question.prompt), question


NB = NoteBankConfig(router="native", chunk_size=128, replay_budget=2)


def test_adapters_attached_but_off_change_nothing_notebank_tf_computes(backbone, tmp_path):
    """Reading, writing, the probe and the routing of NB-LoRA (non-zero B) equal NB-TF's bit for bit."""
    tok = backbone.tokenizer
    context, q_ids, question = context_and_question(tok)
    tf = build_method(NB)
    tf.prepare(backbone)
    mem_tf = tf.read(backbone, context)
    sel_tf, replay_tf, _ = tf.select(backbone, mem_tf, q_ids, question, Stopwatch())
    probe_tf = tf._probe(backbone, mem_tf, q_ids)
    logits_tf = backbone.forward(backbone.init_state(), context)

    lora_nb = build_method(replace(NB, adapter=make_adapter(backbone, tmp_path / "a", 0.5)))
    lora_nb.prepare(backbone)  # attached to the same model now
    mem = lora_nb.read(backbone, context)
    sel, replay, _ = lora_nb.select(backbone, mem, q_ids, question, Stopwatch())
    assert len(mem.extra) >= 2
    for a, b in zip(mem.state.layers, mem_tf.state.layers):
        assert torch.equal(a.recurrent, b.recurrent) and torch.equal(a.conv, b.conv)
    assert torch.equal(mem.extra.token_ids, mem_tf.extra.token_ids)
    assert torch.equal(mem.extra.spans, mem_tf.extra.spans)
    assert torch.equal(mem.extra.addresses, mem_tf.extra.addresses)
    assert sel.notes == sel_tf.notes and sel.scores == sel_tf.scores and replay == replay_tf
    assert torch.equal(lora_nb._probe(backbone, mem, q_ids), probe_tf)
    assert torch.equal(backbone.forward(backbone.init_state(), context), logits_tf)
    # and the adapters do act where they are on: the readout's logits move
    with lora_nb.adapter.on(backbone):
        on = backbone.forward(mem.state.clone(), replay + q_ids)
    assert not torch.equal(on, backbone.forward(mem_tf.state.clone(), replay + q_ids))


def test_b_zero_adapters_on_answer_as_notebank_tf_and_records_name_the_adapter(backbone, tmp_path):
    tok = backbone.tokenizer
    context, q_ids, question = context_and_question(tok)
    folder = make_adapter(backbone, tmp_path / "zero", 0.0)
    tf, nb = build_method(NB), build_method(replace(NB, adapter=folder))
    tf.prepare(backbone)
    nb.prepare(backbone)
    a_tf = tf.answer(backbone, tf.read(backbone, context), q_ids, question)
    a_nb = nb.answer(backbone, nb.read(backbone, context), q_ids, question)
    assert a_nb.ids == a_tf.ids and len(a_nb.ids) > 0
    assert a_nb.stats["selected"] == a_tf.stats["selected"]
    assert a_nb.stats["adapter"] == {"path": str((tmp_path / "zero").resolve()), "hash": file_hash(folder)}
    assert "adapter" not in a_tf.stats


def test_plain_lora_on_for_question_and_answer_only(backbone, tmp_path):
    tok = backbone.tokenizer
    context, q_ids, question = context_and_question(tok)
    plain = build_method(PlainConfig())
    zero = build_method(PlainConfig(adapter=make_adapter(backbone, tmp_path / "z", 0.0)))
    big = build_method(PlainConfig(adapter=make_adapter(backbone, tmp_path / "b", 2.0)))
    for m in (plain, zero, big):
        m.prepare(backbone)
    mems = [m.read(backbone, context) for m in (plain, zero, big)]
    for mem in mems[1:]:  # the context is read with the adapters off
        assert all(torch.equal(a.recurrent, b.recurrent) for a, b in zip(mem.state.layers, mems[0].state.layers))
    assert zero.answer(backbone, mems[1], q_ids, question).ids == plain.answer(backbone, mems[0], q_ids, question).ids
    with big.adapter.on(backbone):
        on = backbone.forward(mems[2].state.clone(), q_ids)
    assert not torch.equal(on, backbone.forward(mems[0].state.clone(), q_ids))
    assert big.answer(backbone, mems[2], q_ids, question).stats["adapter"]["path"] == str((tmp_path / "b").resolve())


def test_answer_before_prepare_is_an_error(backbone, tmp_path):
    tok = backbone.tokenizer
    context, q_ids, question = context_and_question(tok)
    m = build_method(PlainConfig(adapter=make_adapter(backbone, tmp_path / "z", 0.0)))
    with pytest.raises(RuntimeError, match="prepare"):
        m.answer(backbone, m.read(backbone, context), q_ids, question)


def test_not_an_adapter_folder_is_one_config_line(tmp_path):
    with pytest.raises(ConfigError) as e:
        NoteBankConfig(adapter=str(tmp_path))
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("method.adapter=") and "adapter_config.json" in msg


def test_other_backbone_stops_before_loading_with_one_line(backbone, tmp_path):
    folder = make_adapter(backbone, tmp_path / "a", 0.0)
    from memexp.core.schema import BackboneConfig, asset_path

    same = BackboneConfig(name="tiny_gdn", arch="gdn", pretrained=asset_path("tiny_gdn"))
    check_backbone(folder, same)  # nothing to say
    cases = [(BackboneConfig(name="tiny_gdn", arch="mamba2", pretrained=asset_path("tiny_gdn")), "arch"),
             (BackboneConfig(name="gdn", arch="gdn", pretrained=asset_path("tiny_gdn")), "backbone"),
             (BackboneConfig(name="tiny_gdn", arch="gdn", model={**TINY_SHAPE, "hidden_size": 64}), "hidden_size")]
    for cfg, what in cases:
        with pytest.raises(ConfigError) as e:
            check_backbone(folder, cfg)
        assert "\n" not in str(e.value) and f"({what}:" in str(e.value), str(e.value)


def test_other_weights_of_the_same_shape_stop_before_loading_with_one_line(backbone, tmp_path):
    """An adapter trained on tiny_gdn's weights: its checkpoint copied elsewhere passes; the copy
    with one tensor changed (same name, arch, shape, config) stops, naming the weights."""
    import shutil

    from safetensors.torch import load_file, save_file

    from memexp.core.file_digest import weights_fingerprint
    from memexp.core.schema import BackboneConfig, asset_path

    shipped = asset_path("tiny_gdn")
    copy, changed = tmp_path / "copy", tmp_path / "changed"
    shutil.copytree(shipped, copy)
    shutil.copytree(shipped, changed)
    (copy / "config.json").write_text((copy / "config.json").read_text() + "\n")  # not a weight file
    tensors = load_file(str(changed / "model.safetensors"))
    name = sorted(tensors)[0]
    tensors[name] = tensors[name].clone()
    tensors[name].view(-1)[0] += 1e-3
    save_file(tensors, str(changed / "model.safetensors"), metadata={"format": "pt"})
    fingerprint = weights_fingerprint(shipped)
    assert fingerprint == weights_fingerprint(copy) != weights_fingerprint(changed)
    folder = make_adapter(backbone, tmp_path / "a", 0.0, weights=fingerprint)
    check_backbone(folder, BackboneConfig(name="tiny_gdn", arch="gdn", pretrained=str(copy)))
    with pytest.raises(ConfigError) as e:
        check_backbone(folder, BackboneConfig(name="tiny_gdn", arch="gdn", pretrained=str(changed)))
    assert "\n" not in str(e.value) and "(weights:" in str(e.value) and fingerprint in str(e.value)


def test_other_shape_stops_at_prepare_with_one_line(backbone, tmp_path):
    """A folder whose record claims tiny_gdn but whose tensors were made for another width."""
    other = load_backbone("tiny_gdn_random")
    folder = make_adapter(other, tmp_path / "o", 0.0, shape={"vocab_size": 258})
    m = build_method(replace(NB, adapter=folder))
    with pytest.raises(AdapterError) as e:
        m.prepare(backbone)
    assert "\n" not in str(e.value) and "q_proj" in str(e.value)
    assert other.config.hidden_size != backbone.config.hidden_size


def test_the_adapter_enters_the_run_identity_by_content(backbone, tmp_path):
    from memexp.core.compose import load_config
    from memexp.run.identity import run_key

    a = make_adapter(backbone, tmp_path / "a", 0.5)
    b = make_adapter(backbone, tmp_path / "b", 0.5)  # the same content elsewhere
    c = make_adapter(backbone, tmp_path / "c", 0.7)
    keys = [run_key(load_config(["method=notebank", f"method.adapter={p}"]))[0] for p in (a, b, c)]
    plain = run_key(load_config(["method=notebank"]))[0]
    assert keys[0] == keys[1] and keys[0] != keys[2] and plain not in keys


def test_a_run_with_another_backbones_adapter_stops_in_the_run_checks(backbone, tmp_path):
    from memexp.core.compose import load_config
    from memexp.run.checks import check_run

    folder = make_adapter(backbone, tmp_path / "a", 0.0)
    check_run(load_config(["backbone=tiny_gdn", "method=plain", f"method.adapter={folder}"]))
    cfg = load_config(["backbone=tiny_gdn_random", "method=notebank", f"method.adapter={folder}"])
    with pytest.raises(ConfigError) as e:
        check_run(cfg)
    assert "\n" not in str(e.value) and "trained on tiny_gdn" in str(e.value)
