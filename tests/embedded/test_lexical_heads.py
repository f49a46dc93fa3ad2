"""memexp.embedded.lexical_heads: taps, projection and the recipe's hold on layer 0's last heads."""

import json

import pytest
import torch
from safetensors.torch import load_file

from memexp.cli.train import main
from memexp.embedded.lexical_heads import lexical_projection, text_whitening, weighted_mean_direction, wire_bag_convs


def test_weighted_mean_direction_by_hand():
    """Rows (1, 0) and (0, 1) counted 3 and 1 times: the mean is (3, 1) / 4, unit (3, 1) / sqrt(10)."""
    got = weighted_mean_direction(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([3.0, 1.0]))
    assert torch.allclose(got, torch.tensor([3.0, 1.0]) / 10 ** 0.5)


def test_projection_is_orthogonal_to_the_mean_and_has_the_asked_std():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(50, 12, generator=g) + 2.0
    mean = weighted_mean_direction(x, torch.ones(50))
    r = lexical_projection(x, mean, torch.randn(4, 12, generator=g), scale=0.3)
    assert r.shape == (4, 12)
    assert (r @ mean).abs().max() < 1e-5
    assert abs((x @ r.T).std().item() - 0.3) < 1e-5


def test_whitening_makes_the_texts_second_moment_the_identity_off_the_mean():
    """The definition: with W = text_whitening(...), the count-weighted second moment of W x is
    I - u u^T (u the mean direction, which W removes), up to the eps on the diagonal."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(40, 6, generator=g, dtype=torch.float64) @ torch.randn(6, 6, generator=g, dtype=torch.float64) + 1.0
    counts = torch.randint(1, 50, (40,), generator=g).double()
    u = weighted_mean_direction(x, counts)
    w = text_whitening(x, counts, u, eps=1e-9)
    y = x @ w.T
    moment = (counts[:, None] * y).T @ y / counts.sum()
    assert torch.allclose(moment, torch.eye(6, dtype=torch.float64) - torch.outer(u, u), atol=1e-6)
    assert (w @ u).abs().max() < 1e-6


def test_bag_taps_by_hand_and_only_the_given_rows_change():
    """Rows 4-7 of 8, 5 taps (oldest first, the last is t): query 1/5 on every tap; bag key 1/4 on
    t-4 .. t-1 and 0 on t; current key 1 on t only; rows 0-3 untouched."""
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(8, 1, 5, generator=g), torch.randn(8, 1, 5, generator=g)
    q0, k0 = q.clone(), k.clone()
    wire_bag_convs(q, k, slice(4, 8))
    assert torch.equal(q[4:, 0], torch.full((4, 5), 1 / 5))
    assert torch.equal(k[4:, 0], torch.tensor([[0.25, 0.25, 0.25, 0.25, 0.0]] * 4))
    assert torch.equal(q[:4], q0[:4]) and torch.equal(k[:4], k0[:4])
    wire_bag_convs(q, k, slice(4, 8), key="current")
    assert torch.equal(k[4:, 0], torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0]] * 4))


@pytest.mark.parametrize("whiten", [False, True])
def test_the_recipe_holds_the_last_heads_lexical_through_training(tmp_path, whiten):
    """2 layers x 4 heads of 8, conv 5, lexical_heads=2: after a few steps the saved layer 0 has
    heads 2-3 with bag taps and q_proj = k_proj orthogonal to the embeddings' mean direction
    weighted by the token counts of every batch the run drew (recounted here from the recipe's
    own batches), at std 0.3 over the vocabulary; heads 0-1 keep the induction layer's taps
    (key on t-1, query on t) and their own trained, different q and k rows."""
    from memexp.backbones import load_backbone
    from memexp.backbones.norms import rms_norm
    from memexp.cli.train import load_recipe
    from memexp.embedded.tiny_gdn_words import batch, step_examples

    out = tmp_path / "ckpt"
    stages = "[{name: s, steps: 3, batch_size: 2, lr: 1.0e-2, min_tokens: 64, max_tokens: 128}]"
    args = ["recipe=tiny_gdn_words", f"output={out}", f"stages={stages}", "eval_samples=0", "threads=1",
            "tokenizer_examples=20", "model.hidden_size=32", "model.head_dim=8", "model.num_hidden_layers=2",
            "model.conv_size=5", "lexical_heads=2", f"lexical_whiten={str(whiten).lower()}",
            # one-token copy keys, whose taps are checked below (the shipped recipe keys on 2-3 tokens)
            "induction_context=[]"]
    assert main(args) == 0
    w = load_file(str(out / "model.safetensors"))
    p = "model.layers.0.attn."
    q, k = w[p + "q_conv1d.weight"], w[p + "k_conv1d.weight"]
    assert torch.equal(q[16:, 0], torch.full((16, 5), 1 / 5))
    assert torch.equal(k[16:, 0], torch.tensor([[0.25] * 4 + [0.0]] * 16))
    assert q[:16, 0].argmax(-1).eq(4).all() and k[:16, 0].argmax(-1).eq(3).all()
    assert torch.equal(w[p + "q_proj.weight"][16:], w[p + "k_proj.weight"][16:])
    assert not torch.allclose(w[p + "q_proj.weight"][:16], w[p + "k_proj.weight"][:16])

    recipe, _ = load_recipe(args[:1] + args[2:])
    tok = load_backbone({"name": "tiny_gdn_words", "arch": "gdn", "pretrained": str(out)}).tokenizer
    counts = torch.zeros(tok.vocab_size)
    for step in range(3):
        inputs = batch(step_examples(recipe, recipe.stages[0], step, tok), tok.eos_id, recipe.other_positions,
                       torch.Generator().manual_seed(0))[0]
        counts += torch.bincount(inputs.reshape(-1), minlength=tok.vocab_size)
    x = rms_norm(w["model.embeddings.weight"], w["model.layers.0.attn_norm.weight"], 1e-6)
    mean = (counts[:, None] * x).sum(0)
    rows = w[p + "k_proj.weight"][16:]
    assert (rows @ mean).abs().max() < 1e-4 * (rows.norm() * mean.norm())
    for head in (2, 3):
        assert abs((x @ w[p + "k_proj.weight"][8 * head : 8 * head + 8].T).std().item() - 0.3) < 1e-4
    assert json.loads((out / "recipe.json").read_text())["recipe"]["lexical_heads"] == 2
    # the whitened run's rows differ from the plain projection of the same seed's bases
    generator = torch.Generator().manual_seed(recipe.seed + 5)
    bases = torch.cat([torch.randn(8, 32, generator=generator) for _ in range(2)])
    plain = bases - (bases @ (mean / mean.norm()))[:, None] * (mean / mean.norm())[None]
    for head in range(2):
        part = slice(8 * head, 8 * head + 8)
        cos = torch.nn.functional.cosine_similarity(plain[part].flatten(), rows[part].flatten(), dim=0)
        assert (cos > 0.999) == (not whiten)
