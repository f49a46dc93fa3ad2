"""scripts/probe/key_head_probe.py: widening the convs changes nothing; the wired head matches by hand."""

import json

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from script_module import load_script

from memexp.core.schema import ASSETS_DIR
from memexp.embedded.lexical_heads import CONVS

SHIPPED = ASSETS_DIR / "tiny_gdn_words"


def test_widened_convs_give_the_shipped_models_logits(tmp_path):
    """The shipped checkpoint and its copy with four more taps per conv (zeros on the new taps) give
    the same logits on a random sequence, loaded through memexp's own loader."""
    import shutil

    from safetensors.torch import save_file

    from memexp.backbones import load_backbone

    probe = load_script("key_head_probe")
    config = json.loads((SHIPPED / "config.json").read_text())
    wide = config["conv_size"] + 4
    save_file(probe.widen_convs(load_file(str(SHIPPED / "model.safetensors")), wide), str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps({**config, "conv_size": wide}))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(SHIPPED / name, tmp_path / name)
    ids = torch.randint(0, config["vocab_size"], (1, 40), generator=torch.Generator().manual_seed(0))
    logits = []
    for path in (SHIPPED, tmp_path):
        backbone = load_backbone({"name": "tiny_gdn_words", "arch": "gdn", "pretrained": str(path),
                                  "device": "cpu", "dtype": "float32"})
        assert backbone.model.model.layers[0].attn.k_conv1d.weight.shape[-1] == (wide - 4 if path == SHIPPED else wide)
        logits.append(backbone.forward(backbone.init_state(), ids))
    assert torch.allclose(logits[0], logits[1], atol=1e-5)


def test_the_wired_head_reads_where_its_two_tokens_stood():
    """Head 1 of 2 (head_dim 4, conv 6 taps), key offset 3, query offset 5: its key convs' nonzero
    taps are t-1 (first half) and t-3 (second half), its query's t and t-5; head 0 is untouched;
    the head's q_proj rows become its k_proj rows; its value passes the current token."""
    probe = load_script("key_head_probe")
    g = torch.Generator().manual_seed(0)
    weights = {f"model.layers.0.attn.{n}.weight": torch.randn(8, 1, 6, generator=g) for n in CONVS}
    weights |= {f"model.layers.0.attn.{n}_proj.weight": torch.randn(8, 8, generator=g) for n in "qk"}
    before = {k: v.clone() for k, v in weights.items()}
    probe.wire_key_head(weights, layer=0, head=1, head_dim=4, key_offset=3, query_offset=5)
    q, k, v = (weights[f"model.layers.0.attn.{n}.weight"][4:, 0] for n in CONVS)
    # taps run oldest (t-5) to current (t)
    assert q.tolist() == [[0, 0, 0, 0, 0, 1]] * 2 + [[1, 0, 0, 0, 0, 0]] * 2
    assert k.tolist() == [[0, 0, 0, 0, 1, 0]] * 2 + [[0, 0, 1, 0, 0, 0]] * 2
    assert v.tolist() == [[0, 0, 0, 0, 0, 1]] * 4
    for n in CONVS:
        assert torch.equal(weights[f"model.layers.0.attn.{n}.weight"][:4], before[f"model.layers.0.attn.{n}.weight"][:4])
    assert torch.equal(weights["model.layers.0.attn.q_proj.weight"][4:], before["model.layers.0.attn.k_proj.weight"][4:])
    assert torch.equal(weights["model.layers.0.attn.q_proj.weight"][:4], before["model.layers.0.attn.q_proj.weight"][:4])


def test_the_bag_head_averages_its_window_and_leaves_the_other_head():
    """Head 1 of 2 (head_dim 4, conv 5 taps) as a bag: key taps t-4 .. t-1 at 1/4 each, query taps
    t-3 .. t at 1/4, value the current token; head 0's taps and q_proj rows are untouched."""
    probe = load_script("key_head_probe")
    g = torch.Generator().manual_seed(0)
    weights = {f"model.layers.0.attn.{n}.weight": torch.randn(8, 1, 5, generator=g) for n in CONVS}
    weights |= {f"model.layers.0.attn.{n}_proj.weight": torch.randn(8, 8, generator=g) for n in "qk"}
    before = {k: v.clone() for k, v in weights.items()}
    probe.bag_head(weights, layer=0, head=1, head_dim=4)
    q, k, v = (weights[f"model.layers.0.attn.{n}.weight"][4:, 0] for n in CONVS)
    assert q.tolist() == [[0, 0.25, 0.25, 0.25, 0.25]] * 4  # oldest tap first
    assert k.tolist() == [[0.25, 0.25, 0.25, 0.25, 0]] * 4
    assert v.tolist() == [[0, 0, 0, 0, 1]] * 4
    for n in CONVS:
        assert torch.equal(weights[f"model.layers.0.attn.{n}.weight"][:4], before[f"model.layers.0.attn.{n}.weight"][:4])
    assert torch.equal(weights["model.layers.0.attn.q_proj.weight"][4:], before["model.layers.0.attn.k_proj.weight"][4:])
    assert torch.equal(weights["model.layers.0.attn.q_proj.weight"][:4], before["model.layers.0.attn.q_proj.weight"][:4])


def test_needle_scores_and_the_asked_needles_rank_by_hand():
    """Two heads, three needle positions (0, 2, 4): head 0's read meets only position 2's key,
    head 1's only position 4's; with the asked needle the second (position 2), head 0 ranks it
    first by a margin of 1 and head 1 last-but-tied, 1 behind."""
    probe = load_script("key_head_probe")
    keys = torch.zeros(6, 2, 2)
    keys[0] = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    keys[2] = torch.tensor([[0.0, 1.0], [0.5, 0.0]])
    keys[4] = torch.tensor([[0.5, 0.0], [0.0, 1.0]])
    read = torch.tensor([[0.0, 1.0], [0.0, 1.0]])
    scores = probe.needle_scores(keys, read, [0, 2, 4])
    assert scores.tolist() == [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    won, margin = probe.asked_rank(scores, asked=1)
    assert won.tolist() == [True, False] and margin.tolist() == [1.0, -1.0]


def test_decorrelated_head_ignores_the_shared_direction_and_leaves_the_others():
    """Embeddings that share one direction (a constant offset on every word): after
    decorrelate_head, head 1's k_proj rows send that direction to zero, its q_proj rows equal
    them, its outputs over the vocabulary have std `scale`, and head 0's rows are untouched."""
    probe = load_script("key_head_probe")
    g = torch.Generator().manual_seed(0)
    shared = torch.randn(8, generator=g)
    embeddings = 0.1 * torch.randn(50, 8, generator=g) + shared
    weights = {"model.embeddings.weight": embeddings, "model.layers.0.attn_norm.weight": torch.ones(8),
               "model.layers.0.attn.k_proj.weight": torch.randn(8, 8, generator=g),
               "model.layers.0.attn.q_proj.weight": torch.randn(8, 8, generator=g)}
    before = {k: v.clone() for k, v in weights.items()}
    probe.decorrelate_head(weights, layer=0, head=1, head_dim=4, eps=1e-6, scale=3.0)
    k = weights["model.layers.0.attn.k_proj.weight"]
    x = embeddings / embeddings.pow(2).mean(-1, keepdim=True).sqrt()  # RMSNorm with unit weight
    mean = x.mean(0)
    assert torch.allclose(k[4:] @ mean, torch.zeros(4), atol=1e-4)
    assert torch.equal(weights["model.layers.0.attn.q_proj.weight"][4:], k[4:])
    assert abs((x @ k[4:].T).std().item() - 3.0) < 1e-3
    for name in ("k_proj", "q_proj"):
        key = f"model.layers.0.attn.{name}.weight"
        assert torch.equal(weights[key][:4], before[key][:4])
    # the words' own differences survive: their keys are far from parallel, unlike the raw rows'
    def cosine(f):
        return (F.normalize(f, dim=-1) @ F.normalize(f, dim=-1).T)[~torch.eye(50, dtype=torch.bool)].mean()

    assert cosine(x @ before["model.layers.0.attn.k_proj.weight"][4:].T) > 0.9
    assert cosine(x @ k[4:].T).abs() < 0.2


def test_keep_taps_decorrelates_the_head_and_leaves_every_conv_as_trained(tmp_path, monkeypatch):
    """`--decorrelate --keep-taps` (the ablation without wired offsets): the written checkpoint's
    convs are the shipped ones widened with zeros, head 3's q_proj and k_proj rows are the new
    decorrelated rows (equal, orthogonal to the layer's mean input), every other tensor unchanged;
    `--keep-taps` alone is refused."""
    import sys

    import pytest

    from memexp.backbones.norms import rms_norm

    probe = load_script("key_head_probe")
    out = tmp_path / "probe"
    monkeypatch.setattr(sys, "argv", ["key_head_probe", "--out", str(out), "--decorrelate", "--keep-taps"])
    probe.main()
    config = json.loads((SHIPPED / "config.json").read_text())
    assert json.loads((out / "config.json").read_text())["conv_size"] == max(8, config["conv_size"])
    shipped = probe.widen_convs(load_file(str(SHIPPED / "model.safetensors")), max(8, config["conv_size"]))
    written = load_file(str(out / "model.safetensors"))
    rows = slice(3 * config["head_dim"], 4 * config["head_dim"])
    prefix = "model.layers.0.attn."
    x = rms_norm(shipped["model.embeddings.weight"], shipped["model.layers.0.attn_norm.weight"], config["norm_eps"])
    k = written[prefix + "k_proj.weight"]
    assert torch.equal(written[prefix + "q_proj.weight"][rows], k[rows])
    assert (k[rows] @ F.normalize(x.mean(0), dim=0)).abs().max() < 1e-4
    assert not torch.equal(k[rows], shipped[prefix + "k_proj.weight"][rows])
    for name, tensor in shipped.items():
        if name in (prefix + "k_proj.weight", prefix + "q_proj.weight"):
            others = torch.ones(tensor.shape[0], dtype=torch.bool)
            others[rows] = False
            assert torch.equal(written[name][others], tensor[others]), name
        else:
            assert torch.equal(written[name], tensor), name
    monkeypatch.setattr(sys, "argv", ["key_head_probe", "--out", str(out), "--keep-taps"])
    with pytest.raises(SystemExit):
        probe.main()
