"""method.layers (the paper's L): only the named layers' channels write and address notes.

The toy's layer 0 is made a layer whose queries carry no word identity (one fixed direction,
like tiny_gdn_words' copy layer, whose queries are the current token only): its channels then
score every note alike and all vote for the first note written. With both layers voting, those
votes outnumber or tie the other layer's and the wrong note wins; with `layers: [1]` the note
that names the question's word does, as it does by construction of the toy.
"""

import random

import pytest
import torch
from helpers.notebank_toy_backbone import FILLER, ToyBackbone

from memexp.core.compose import load_config
from memexp.core.schema import ConfigError
from memexp.core.types import Question
from memexp.methods.notebank.config import NoteBankConfig
from memexp.methods.notebank.method import NoteBank

ZEBRA = "the code of zebra is seven."


class BlindFirstLayer(ToyBackbone):
    """ToyBackbone whose layer-0 queries are one constant unit vector; keys (so distinctiveness)
    and the state are the toy's."""

    def forward(self, state, ids, observer=None):
        if observer is None:
            return super().forward(state, ids, None)
        blind = torch.nn.functional.normalize(torch.ones(self.d_k), dim=0)

        def watch(layer, start, keys, queries):
            observer(layer, start, keys, blind.expand_as(queries) if layer == 0 else queries)

        return super().forward(state, ids, watch)


def filler(rng: random.Random, sentences: int) -> str:
    return " ".join(" ".join(rng.choice(FILLER) for _ in range(rng.randint(6, 12))) + " ." for _ in range(sentences))


@pytest.fixture(scope="module")
def context():
    bb = BlindFirstLayer(layers=2, heads=6, seed=0)
    rng = random.Random(1)
    ids = bb.tokenizer.encode(" ".join([filler(rng, 150), ZEBRA, filler(rng, 150)]))
    return bb, ids


def replayed(bb, layers, ids):
    nb = NoteBank(NoteBankConfig(chunk_size=256, replay_budget=1, layers=layers))
    memory = nb.read(bb, ids)
    prompt = "tell me about zebra ?"
    answer = nb.answer(bb, memory, bb.tokenizer.encode(prompt), Question("q", prompt, ["seven"], "string_match", 4))
    (entry,) = answer.stats["selected"]
    return memory, entry


def test_a_layer_without_word_queries_outvotes_the_right_note_unless_left_out(context):
    bb, ids = context
    memory, entry = replayed(bb, None, ids)
    assert memory.extra.addresses.shape[1] == 12
    assert entry["note"] == 0 and ZEBRA not in entry["text"]
    memory, entry = replayed(bb, [1], ids)
    assert memory.extra.addresses.shape[1] == 6  # layer 1's six heads only
    assert ZEBRA in entry["text"] and entry["note"] != 0


def test_the_toy_with_word_queries_in_both_layers_finds_the_note_with_all_layers(context):
    """The control: the first test's wrong note comes from the blind layer, not from the context."""
    _, ids = context
    _, entry = replayed(ToyBackbone(layers=2, heads=6, seed=0), None, ids)
    assert ZEBRA in entry["text"]


def test_a_layer_the_backbone_lacks_stops_with_the_allowed_layers(context):
    bb, ids = context
    with pytest.raises(ConfigError, match=r"method.layers=\[2\]: backbone 'toy' has no recurrent layer 2; "
                                          r"allowed values are 0, 1"):
        NoteBank(NoteBankConfig(chunk_size=256, layers=[2])).read(bb, ids)


@pytest.mark.parametrize("value, message", [
    ("[]", "name at least one recurrent layer"),
    ("[1,1]", "layer 1 is named twice"),
    ("[-1]", "-1 is not a layer index"),
])
def test_invalid_layers_stop_at_validation(value, message):
    with pytest.raises(ConfigError, match=message):
        load_config(["method=notebank", f"method.layers={value}"])


def test_layers_are_checked_against_the_backbone_config_before_it_loads(monkeypatch):
    import memexp.backbones as backbones
    from memexp.run.checks import check_model_config

    monkeypatch.setattr(backbones, "load_backbone", lambda *a, **k: pytest.fail("the backbone was loaded"))
    cfg = load_config(["backbone=tiny_gdn_words", "method=notebank", "method.layers=[1,4]"])
    with pytest.raises(ConfigError, match=r"method.layers=\[1, 4\]: backbone=tiny_gdn_words has no recurrent layer 4; "
                                          r"allowed values are 0, 1, 2, 3"):
        check_model_config(cfg)


def test_costs_count_the_named_layers_channels_only():
    """Address storage, 2 N J d_rho bytes (Eq. 19), with J counted on the loaded model's channels."""
    from memexp.backbones import load_backbone
    from memexp.backbones.shapes import shapes_for
    from memexp.methods.notebank.costs import notebank_storage

    cfg = load_config(["backbone=tiny_gdn_words", "method=notebank", "method.layers=[1,3]", "method.address_dim=16"])
    loaded = load_backbone(cfg.backbone)
    named = sum(ch.layer in (1, 3) for ch in loaded.channels)
    assert named == 8
    shapes = shapes_for(cfg.backbone)
    storage = notebank_storage(shapes, cfg.method, notes=10, archived_tokens=640)
    assert storage["device_addresses"] == 2 * 10 * named * 16
    everything = notebank_storage(shapes, NoteBankConfig(), notes=10, archived_tokens=640)
    assert everything["device_addresses"] == 2 * 10 * len(loaded.channels) * 16
